"""Extraction predict loop + cache: correctness, batch invariance, zero forwards when warm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch

from core.audio_fixtures import write_manifest_tree
from core.toy_upstream import ToyUpstream
from speechbias.fileio.audio import load_audio
from speechbias.features.cache import FeatureCache
from speechbias.features.extraction import extract_statistics
from speechbias.stimuli import load_manifest


def _trainer():
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
    )


def _direct(upstream, path):
    wav = torch.from_numpy(load_audio(path))[None]
    hs, n = upstream(wav, torch.tensor([wav.shape[1]]))
    return np.stack([h[0, : int(n[0])].numpy() for h in hs])  # (L, T, D)


def test_statistics_match_a_direct_forward_and_warm_run_does_no_forward(tmp_path):
    m = load_manifest(write_manifest_tree(tmp_path / "data"))
    up = ToyUpstream()
    stats, n_fwd = extract_statistics(up, list(m["path"]), tmp_path / "cache", _trainer(), batch_size=3)
    assert n_fwd == len(m) and stats.mean.shape == (len(m), 3, 4)
    for i, p in enumerate(m["path"]):
        ref = _direct(ToyUpstream(), p)
        np.testing.assert_allclose(stats.mean[i], ref.mean(axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(stats.max[i], ref.max(axis=1), rtol=1e-6)
        assert stats.n_frames[i] == ref.shape[1]
    up2 = ToyUpstream()
    again, n_fwd2 = extract_statistics(up2, list(m["path"]), tmp_path / "cache", _trainer(), batch_size=3)
    assert n_fwd2 == 0 and up2.seen == 0
    np.testing.assert_array_equal(again.mean, stats.mean)


def test_batched_equals_one_at_a_time(tmp_path):
    m = load_manifest(write_manifest_tree(tmp_path / "data"))
    one, _ = extract_statistics(ToyUpstream(), list(m["path"]), tmp_path / "c1", _trainer(), batch_size=1)
    many, _ = extract_statistics(ToyUpstream(), list(m["path"]), tmp_path / "c2", _trainer(), batch_size=16)
    np.testing.assert_allclose(one.mean, many.mean, atol=1e-6)
    np.testing.assert_allclose(one.min, many.min, atol=1e-6)


def test_padding_sensitive_upstream_is_never_padded(tmp_path):
    m = load_manifest(write_manifest_tree(tmp_path / "data"))
    # clips have different lengths, so a padded batch WOULD change this upstream's states
    leaky = ToyUpstream(leaky_padding=True)
    wavs = [torch.from_numpy(load_audio(p)) for p in m["path"][:2]]
    assert wavs[0].shape != wavs[1].shape
    padded = torch.nn.utils.rnn.pad_sequence(wavs, batch_first=True)
    hs_pad, _ = leaky(padded, torch.tensor([w.shape[0] for w in wavs]))
    hs_one, _ = leaky(wavs[0][None], torch.tensor([wavs[0].shape[0]]))
    assert not torch.allclose(hs_pad[0][0, :3], hs_one[0][0, :3], atol=1e-4)
    one, _ = extract_statistics(ToyUpstream(True), list(m["path"]), tmp_path / "c1", _trainer(), batch_size=1)
    many, _ = extract_statistics(ToyUpstream(True), list(m["path"]), tmp_path / "c2", _trainer(), batch_size=16)
    np.testing.assert_allclose(one.mean, many.mean, atol=1e-6)


def test_corrupt_entry_is_recomputed(tmp_path, caplog):
    m = load_manifest(write_manifest_tree(tmp_path / "data", n_per_role=1))
    paths = list(m["path"])
    extract_statistics(ToyUpstream(), paths, tmp_path / "cache", _trainer())
    cache = FeatureCache(tmp_path / "cache")
    fp = ToyUpstream().fingerprint
    sha = cache.lookup_audio(paths[0])[0]
    entry = cache.entry_path(fp, sha)
    entry.write_bytes(b"\x00" * 10)
    up = ToyUpstream()
    _, n_fwd = extract_statistics(up, paths, cache, _trainer())
    assert n_fwd == 1 and "corrupt" in caplog.text


def _extract_in_child(data: str, cache: str, out: str) -> None:
    import json

    up = ToyUpstream()
    _, n = extract_statistics(up, sorted(str(p) for p in Path(data).glob("clips/*.wav")), cache, _trainer())
    Path(out).write_text(json.dumps(n))


def test_concurrent_jobs_extract_a_stimulus_set_once(tmp_path):
    import json
    import multiprocessing as mp

    write_manifest_tree(tmp_path / "data")
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(
            target=_extract_in_child,
            args=(str(tmp_path / "data"), str(tmp_path / "cache"), str(tmp_path / f"n{i}.json")),
        )
        for i in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    counts = sorted(json.loads((tmp_path / f"n{i}.json").read_text()) for i in range(2))
    assert counts == [0, 16]  # one job did every forward, the other waited and found all cached


class _BarState(pl.Callback):
    """Records whether the progress bar was enabled while the predict loop ran."""

    def __init__(self):
        self.enabled_during_predict = None

    def on_predict_start(self, trainer, pl_module):
        self.enabled_during_predict = trainer.progress_bar_callback.is_enabled


def _trainer_with_bar(*callbacks):
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=True,
        callbacks=list(callbacks),
    )


def test_progress_bar_only_when_there_is_work(tmp_path):
    """Cold: the bar shows; warm (every clip cached): hidden for the predict loop, enabled again after;
    one clip missing: shown again."""
    from speechbias.features.extraction import count_uncached

    m = load_manifest(write_manifest_tree(tmp_path / "data"))
    paths = list(m["path"])
    cache = FeatureCache(tmp_path / "cache")
    assert count_uncached(paths, cache, ToyUpstream().fingerprint) == len(paths)
    cold = _BarState()
    extract_statistics(ToyUpstream(), paths, cache, _trainer_with_bar(cold), batch_size=4)
    assert cold.enabled_during_predict is True
    assert count_uncached(paths, cache, ToyUpstream().fingerprint) == 0
    warm = _BarState()
    trainer = _trainer_with_bar(warm)
    _, n_forward = extract_statistics(ToyUpstream(), paths, cache, trainer, batch_size=4)
    assert n_forward == 0 and warm.enabled_during_predict is False
    assert trainer.progress_bar_callback.is_enabled  # shown again for what follows (train.py's fit)
    cache.entry_path(ToyUpstream().fingerprint, cache.lookup_audio(paths[0])[0]).unlink()
    assert count_uncached(paths, cache, ToyUpstream().fingerprint) == 1
    one_missing = _BarState()
    _, n_forward = extract_statistics(ToyUpstream(), paths, cache, _trainer_with_bar(one_missing), batch_size=4)
    assert n_forward == 1 and one_missing.enabled_during_predict is True


def test_a_warm_loop_reads_each_entry_once_into_one_stack(tmp_path):
    """A one-process loop whose clips are all cached reads them before the loop into one preallocated
    stack (one verified read per entry, none in the loop) and returns that stack: the same statistics
    as the per-clip path of a cold run."""
    from unittest import mock

    m = load_manifest(write_manifest_tree(tmp_path / "data"))
    paths = list(m["path"])
    cold, n_cold = extract_statistics(ToyUpstream(), paths, tmp_path / "cache", _trainer(), batch_size=3)
    reads = {"get": 0, "read_into": 0}

    def counting(name, fn):
        def wrapped(self, *a, **k):
            reads[name] += 1
            return fn(self, *a, **k)

        return wrapped

    with (
        mock.patch.object(FeatureCache, "get", counting("get", FeatureCache.get)),
        mock.patch.object(FeatureCache, "read_into", counting("read_into", FeatureCache.read_into)),
    ):
        warm, n_warm = extract_statistics(ToyUpstream(), paths, tmp_path / "cache", _trainer(), batch_size=3)
    assert n_cold == len(paths) and n_warm == 0
    assert reads == {"get": 1, "read_into": len(paths) - 1}  # the first entry gives the stack's shape
    for name in ("mean", "min", "max", "n_frames"):
        np.testing.assert_array_equal(getattr(warm, name), getattr(cold, name))
    assert warm.audio_sha == cold.audio_sha
