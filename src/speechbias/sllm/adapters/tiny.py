"""A tiny, randomly initialised Qwen2-Audio built from configs, for wiring tests (no download).

Tokenizer: a word-level ``tokenizers`` model over a small vocabulary plus the special tokens the
Qwen2-Audio processor and chat template use (``<|im_start|>``, ``<|im_end|>``, ``<|audio_bos|>``,
``<|AUDIO|>``, ``<|audio_eos|>``, ``<|endoftext|>``). Feature extractor: a local
``WhisperFeatureExtractor`` with a short window (``chunk_length_s``) and few mel bins, matched by the
audio encoder's ``max_source_positions`` (= mel frames / 2). Answers are random tokens.
"""

from __future__ import annotations

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>")
WORDS = tuple(
    (
        "A B C a b c the answer is option he she they was were man woman girl boy old young child nurse doctor "
        "engineer good bad very not and or to of in on at it i you system user assistant audio . , : ( ) ! ?"
    ).split()
)


def build_tiny_tokenizer(words=WORDS):
    """A ``PreTrainedTokenizerFast`` (word level, whitespace + punctuation split) with Qwen2-Audio's specials."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0}
    for w in list(dict.fromkeys(words)):
        vocab.setdefault(w, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.add_special_tokens({"additional_special_tokens": [t for t in SPECIAL_TOKENS if t != "<|endoftext|>"]})
    return tok


def build_tiny_qwen2_audio(seed: int = 0, chunk_length_s: int = 2, n_mels: int = 32):
    """``(model, processor)``: random Qwen2AudioForConditionalGeneration (~100 k parameters) and its processor."""
    import torch
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    from speechbias.fileio.audio import SAMPLE_RATE

    tokenizer = build_tiny_tokenizer()
    extractor = WhisperFeatureExtractor(
        feature_size=n_mels, sampling_rate=SAMPLE_RATE, chunk_length=chunk_length_s, hop_length=160, n_fft=400
    )
    processor = Qwen2AudioProcessor(feature_extractor=extractor, tokenizer=tokenizer)
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2AudioConfig(
        audio_config={
            "model_type": "qwen2_audio_encoder",
            "d_model": 32,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "num_mel_bins": n_mels,
            "max_source_positions": extractor.nb_max_frames // 2,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 1024,
            "pad_token_id": pad_id,
            "eos_token_id": eos_id,
            "bos_token_id": None,
        },
        audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2AudioForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = pad_id
    model.generation_config.eos_token_id = eos_id
    return model, processor


def tiny_qwen2_audio_adapter(
    seed: int = 0, name: str = "tiny_random_qwen2_audio", device: str = "cpu", dtype: str = "float32", **kwargs
):
    """A :class:`~speechbias.sllm.adapters.qwen2_audio.Qwen2AudioAdapter` around the tiny random model."""
    from speechbias.sllm.adapters.qwen2_audio import Qwen2AudioAdapter

    model, processor = build_tiny_qwen2_audio(seed=seed)
    return Qwen2AudioAdapter(
        model_id="tiny-random/qwen2-audio",
        name=name,
        device=device,
        dtype=dtype,
        model=model,
        processor=processor,
        **kwargs,
    )


#: a minimal ChatML template (the tiny tokenizer has no chat template of its own)
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_chat_lm(seed: int = 0, words=WORDS + ("none",)):
    """``(model, tokenizer)``: a random Qwen2ForCausalLM (~30 k parameters) over the tiny word-level
    tokenizer, with :data:`TINY_CHAT_TEMPLATE` as its chat template."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer(words)
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=None,
        )
    ).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def tiny_chat_judge(seed: int = 0, max_new_tokens: int = 4):
    """A :class:`~speechbias.sllm.adapters.judge.ChatJudge` around :func:`build_tiny_chat_lm` (random
    verdicts: wiring of the judge path only)."""
    from speechbias.sllm.adapters.judge import ChatJudge

    model, tokenizer = build_tiny_chat_lm(seed=seed)
    return ChatJudge(
        "tiny-random/qwen2-chat",
        model=model,
        tokenizer=tokenizer,
        device="cpu",
        dtype="float32",
        max_new_tokens=max_new_tokens,
    )
