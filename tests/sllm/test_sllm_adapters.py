"""Wiring of the transformers adapters on a tiny random Qwen2-Audio (no download)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from speechbias.model_loading import MissingWeightsError
from speechbias.sllm.adapters.base import ChatInput, SamplingParams
from speechbias.sllm.adapters.policy import PolicyAdapter
from speechbias.sllm.adapters.tiny import build_tiny_qwen2_audio, build_tiny_tokenizer, tiny_qwen2_audio_adapter

GREEDY = SamplingParams(do_sample=False, max_new_tokens=6)
PROMPT = "Which continuation?\nA. she was a nurse\nB. he was a doctor\nC. the sky\nAnswer with the letter."


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    paths = []
    for k, (sec, f) in enumerate(((1.3, 220.0), (0.6, 330.0), (1.9, 150.0))):
        t = np.arange(int(sec * 16_000)) / 16_000
        p = d / f"c{k}.wav"
        sf.write(str(p), (0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32), 16_000)
        paths.append(str(p))
    return paths


@pytest.fixture(scope="module")
def tiny():
    return tiny_qwen2_audio_adapter(seed=0)


def test_tokenizer_keeps_special_tokens_whole():
    tok = build_tiny_tokenizer()
    ids = tok("<|audio_bos|><|AUDIO|><|audio_eos|> <|im_start|>user")["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[:5] == ["<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>", "<|im_start|>", "user"]


def test_audio_placeholders_expand_to_encoder_frames(tiny, clips):
    text = tiny.processor.apply_chat_template(
        tiny.conversation(ChatInput(PROMPT, clips[0])), add_generation_prompt=True, tokenize=False
    )
    assert "<|audio_bos|><|AUDIO|><|audio_eos|>" in text and text.endswith("<|im_start|>assistant\n")
    from speechbias.fileio.audio import load_audio

    batch = tiny.processor(text=[text], audio=[load_audio(clips[0])], sampling_rate=16_000, return_tensors="pt")
    frames = 1.3 * 100  # 10 ms hop
    expected = ((int(frames) - 1) // 2 + 1 - 2) // 2 + 1
    n_audio = int((batch["input_ids"] == tiny.model.config.audio_token_id).sum())
    assert abs(n_audio - expected) <= 1


def test_batched_greedy_equals_one_by_one(tiny, clips):
    inputs = [ChatInput(PROMPT, p) for p in clips]
    batched = tiny.generate(inputs, GREEDY)
    single = [tiny.generate([i], GREEDY)[0] for i in inputs]
    assert batched == single and len(batched) == 3 and all(isinstance(a, str) for a in batched)
    # answers hold only generated text, never the prompt
    assert all("Which continuation" not in a for a in batched)


def test_text_only_and_sampling(tiny):
    out = tiny.generate([ChatInput(PROMPT + " she said hello", None)] * 2, SamplingParams(max_new_tokens=4))
    assert len(out) == 2
    kw = SamplingParams().generate_kwargs()
    assert kw == {"do_sample": True, "temperature": 1.0, "top_p": 0.9, "top_k": 100, "max_new_tokens": 64}
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)


def test_generic_chat_template_adapter_from_local_dir(tmp_path, clips):
    from speechbias.sllm.adapters.chat_template import ChatTemplateAudioLLM

    model, processor = build_tiny_qwen2_audio(seed=0)
    model.save_pretrained(tmp_path / "m")
    processor.save_pretrained(tmp_path / "m")
    generic = ChatTemplateAudioLLM(str(tmp_path / "m"), device="cpu", dtype="float32")
    assert type(generic.model).__name__ == "Qwen2AudioForConditionalGeneration"
    inputs = [ChatInput(PROMPT, clips[0]), ChatInput(PROMPT, clips[1])]
    ref = tiny_qwen2_audio_adapter(seed=0)
    assert generic.generate(inputs, GREEDY) == ref.generate(inputs, GREEDY)
    assert generic.name == "m"


def test_missing_weights_name_the_model(monkeypatch):
    from speechbias.sllm.adapters.qwen2_audio import Qwen2AudioAdapter

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MissingWeightsError, match=r"'speechbias-test/no-such-audio-llm'.*HF_HUB_OFFLINE=1"):
        Qwen2AudioAdapter(model_id="speechbias-test/no-such-audio-llm", device="cpu")


def test_policy_adapter():
    key = {"A": "irrelevant", "B": "stereotypical", "C": "anti-stereotypical"}
    inp = ChatInput("q", None, answer_key=key)
    assert PolicyAdapter("stereotypical").generate([inp], GREEDY) == ["B"]
    assert PolicyAdapter("irrelevant", style="sentence").generate([inp], GREEDY) == ["The answer is (A)."]
    r = PolicyAdapter("random", seed=3)
    assert r.generate([inp], GREEDY) == r.generate([inp], GREEDY)
    with pytest.raises(ValueError, match="policy must be one of"):
        PolicyAdapter("biased")


def test_chat_judge_wiring():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from speechbias.sllm.adapters.judge import ChatJudge

    tok = build_tiny_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    torch.manual_seed(0)
    lm = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    )
    judge = ChatJudge("tiny-judge", model=lm, tokenizer=tok, device="cpu", dtype="float32")
    verdict = judge.judge("whatever", {"A": "x", "B": "y", "C": "z"})
    assert verdict in (None, "A", "B", "C")


def test_fingerprint_is_the_digest_and_answers_are_keyed_by_the_fields():
    """One fingerprint type for every model: ``fingerprint`` is the digest of ``model_fingerprint``;
    the answer cache's signatures hash the identity fields themselves (unchanged keys)."""
    import hashlib
    import json

    from speechbias.model_loading import sha256_json
    from speechbias.sllm.adapters.base import SamplingParams
    from speechbias.sllm.probe import request_signature
    from speechbias.sllm.prompts import ProbeRequest

    adapter = PolicyAdapter("stereotypical", seed=3)
    fields = adapter.fingerprint_fields()
    assert adapter.fingerprint == sha256_json(fields)[:32] == adapter.model_fingerprint.digest
    sampling = SamplingParams()
    request = ProbeRequest(
        key="k",
        domain="gender",
        item_id=1,
        speaker="s",
        group="female",
        order=("stereotype", "anti_stereotype", "unrelated"),
        options={},
        prompt="Which one?",
        audio_path="/a.wav",
    )
    payload = json.dumps(
        {"model": fields, "sampling": sampling.as_dict(), "seed": 0, "prompt": "Which one?", "audio": "/a.wav"},
        sort_keys=True,
        default=str,
    )
    assert (
        request_signature(request, adapter.model_fingerprint.fields, sampling, 0)
        == hashlib.sha256(payload.encode()).hexdigest()[:24]
    )
