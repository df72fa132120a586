"""Transcribers on tiny random models built locally: output shape, batch invariance, caching, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from speechbias.asr.cache import HypothesisCache
from speechbias.asr.models import CTCTranscriber, WhisperTranscriber, tiny_random_ctc, tiny_random_whisper
from speechbias.asr.transcribe import in_shard, transcribe_corpus
from speechbias.model_loading import MissingWeightsError
from tests.asr.fixtures import write_tone


def _wavs(n, seconds=0.8):
    rng = np.random.default_rng(0)
    return [(0.2 * rng.normal(size=int(16000 * (seconds + 0.25 * k)))).astype(np.float32) for k in range(n)]


@pytest.fixture(scope="module")
def tiny_ctc(tmp_path_factory):
    return tiny_random_ctc(tmp_path_factory.mktemp("cache"), batch_size=3, device="cpu")


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    return tiny_random_whisper(tmp_path_factory.mktemp("cache"), max_new_tokens=5, batch_size=2, device="cpu")


def test_ctc_batched_equals_one_by_one(tiny_ctc):
    wavs = _wavs(4)
    batched = tiny_ctc.transcribe(wavs)
    single = [tiny_ctc.transcribe([w])[0] for w in wavs]
    assert batched == single
    assert all(isinstance(t, str) and t for t in batched)
    assert tiny_ctc.pad_invariant


def test_whisper_short_and_long_form(tiny_whisper):
    wavs = _wavs(2) + [np.random.default_rng(1).normal(0, 0.1, 16000 * 31).astype(np.float32)]
    out = tiny_whisper.transcribe(wavs)
    assert len(out) == 3 and all(isinstance(t, str) for t in out)
    assert tiny_whisper.transcribe(wavs[:1]) == out[:1]  # batch of 2 vs alone: same text


def test_fingerprint_depends_on_decoding_and_weights(tmp_path, tiny_whisper):
    a = WhisperTranscriber(model_id=tiny_whisper.model_id, num_beams=1)
    b = WhisperTranscriber(model_id=tiny_whisper.model_id, num_beams=4)
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == WhisperTranscriber(model_id=tiny_whisper.model_id, num_beams=1, batch_size=7).fingerprint
    other = tiny_random_whisper(tmp_path, seed=1)
    assert other.fingerprint_fields()["weights_sha256"] != a.fingerprint_fields()["weights_sha256"]


@pytest.mark.parametrize("add_adapter", [False, True])
def test_ctc_frames_follow_the_models_own_length_formula(add_adapter):
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    from speechbias.asr.models import ctc_frames

    config = Wav2Vec2Config(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        add_adapter=add_adapter,
        num_adapter_layers=2,
        adapter_stride=2,
        output_hidden_size=16,
    )
    lengths = torch.tensor([400, 401, 1_234, 16_000, 16_001])
    reference = Wav2Vec2ForCTC(config).wav2vec2._get_feat_extract_output_lengths(lengths)  # private: pinned here
    assert torch.equal(ctc_frames(config, lengths), reference)


def test_missing_model_names_the_id(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = CTCTranscriber(model_id="facebook/no-such-model-xyz")
    with pytest.raises(MissingWeightsError, match=r"'facebook/no-such-model-xyz'.*HF_HUB_OFFLINE=1"):
        t.transcribe(_wavs(1))


def test_cache_means_no_second_transcription(tmp_path, tiny_ctc):
    paths = []
    for k in range(5):
        p = tmp_path / f"a{k}.wav"
        write_tone(p, 0.6, 300 + 50 * k, seed=k)
        paths.append(str(p))
    (tmp_path / "bad.wav").write_bytes(b"not audio")
    utts = pd.DataFrame(
        {"utterance_id": [f"u{k}" for k in range(5)] + ["bad"], "path": paths + [str(tmp_path / "bad.wav")]}
    )
    cache = HypothesisCache(tmp_path / "hyp", tiny_ctc.fingerprint)
    calls = []
    orig = tiny_ctc.transcribe
    tiny_ctc.transcribe = lambda wavs: calls.append(len(wavs)) or orig(wavs)
    try:
        first = transcribe_corpus(utts, tiny_ctc, cache, progress=False)
        assert first.n_transcribed == 5 and first.n_cached == 0 and sum(calls) == 5
        assert list(first.failed.utterance_id) == ["bad"] and "unreadable" in first.failed.reason.iloc[0]
        second = transcribe_corpus(utts, tiny_ctc, cache, progress=False)
        assert second.n_transcribed == 0 and second.n_cached == 5 and sum(calls) == 5
        pd.testing.assert_frame_equal(first.hypotheses, second.hypotheses)
        # shards are disjoint and cover everything
        ids = set()
        for i in range(3):
            r = transcribe_corpus(utts, tiny_ctc, cache, shard_index=i, shard_count=3, progress=False)
            ids |= set(r.hypotheses.utterance_id)
            assert set(r.hypotheses.utterance_id) == {u for u in utts.utterance_id[:5] if in_shard(u, i, 3)}
        assert ids == set(utts.utterance_id[:5])
    finally:
        tiny_ctc.transcribe = orig
    # a corrupt entry is re-transcribed, not fatal
    sha = first.hypotheses.audio_sha256.iloc[0]
    cache.path(sha).write_text("{broken")
    assert cache.get(sha) is None


def _checkpoint_copy(src, dst, drop=(), generation=None):
    import json
    import shutil

    shutil.copytree(src, dst)
    for name in drop:
        (dst / name).unlink()
    if generation is not None:
        (dst / "generation_config.json").write_text(json.dumps(generation))
    return dst


def test_a_local_whisper_checkpoint_without_tokenizer_or_generation_config_is_named_before_loading(
    tmp_path, tiny_whisper
):

    tiny_whisper.load()  # the complete tiny checkpoint loads
    src = Path(tiny_whisper.model_id)
    bare = _checkpoint_copy(src, tmp_path / "bare", drop=("tokenizer.json", "generation_config.json"))
    with pytest.raises(MissingWeightsError) as err:
        WhisperTranscriber(model_id=str(bare), device="cpu").transcribe([np.zeros(16000, np.float32)])
    msg = str(err.value)
    assert "tokenizer (tokenizer.json or vocab.json + merges.txt)" in msg
    assert "generation_config.json (with lang_to_id, task_to_id, no_timestamps_token_id)" in msg
    assert "outdated" not in msg and str(bare) in msg
    # a generation config from before Whisper's language/task ids: named, instead of transformers' error
    old = _checkpoint_copy(src, tmp_path / "old", generation={"decoder_start_token_id": 1, "eos_token_id": 0})
    with pytest.raises(
        MissingWeightsError, match="lang_to_id, task_to_id, no_timestamps_token_id in generation_config.json"
    ):
        WhisperTranscriber(model_id=str(old), device="cpu").load()


def test_a_local_ctc_checkpoint_without_its_vocabulary_is_named(tmp_path):

    ctc = tiny_random_ctc(tmp_path / "cache", device="cpu")
    bare = _checkpoint_copy(Path(ctc.model_id), tmp_path / "bare", drop=("vocab.json",))
    with pytest.raises(MissingWeightsError, match=r"tokenizer \(vocab.json or tokenizer.json\)"):
        CTCTranscriber(model_id=str(bare), device="cpu").load()


def test_the_command_with_an_incomplete_local_whisper_prints_one_line_and_exits_1(tmp_path, tiny_whisper):
    """What the user types: python evaluate.py task=wer_disparity asr=whisper_small asr.model_id=<folder>."""
    import os
    import subprocess
    import sys

    tiny_whisper.load()
    bare = _checkpoint_copy(Path(tiny_whisper.model_id), tmp_path / "my-whisper", drop=("generation_config.json",))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            str(repo / "evaluate.py"),
            "task=wer_disparity",
            "asr=whisper_small",
            f"asr.model_id={bare}",
            "asr.device=cpu",
            "logger=none",
            f"hydra.run.dir={tmp_path / 'run'}",
            f"paths.cache_dir={tmp_path / 'cache'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert (
        len(errors) == 1 and "generation_config.json (with lang_to_id" in errors[0] and "Traceback" not in proc.stderr
    )
