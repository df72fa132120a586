"""A Hugging Face upstream's cache key (fingerprint), read from its config and its files before any build:
equal to what the built upstream says (inline configs, a local folder, a hub id in a Hugging Face cache laid
out as huggingface_hub lays it out); two revisions, or a weight file written again with its size and mtime
kept, never share a key; an unchanged model keeps its key; a warm run of evaluate.py imports no torch."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from speechbias.run_context import upstream_info
from speechbias.upstream import hf_identity
from speechbias.upstream.deferred import DeferredUpstream
from speechbias.upstream.families import FAMILIES
from speechbias.upstream.hf import HFUpstream
from speechbias.upstream.hf_identity import hf_fingerprint_fields
from entry_commands import run_entry
from upstream.tiny_models import build_tiny, tiny_config

COMMIT = "c" * 40


def save_hubert(path: Path, seed: int) -> Path:
    """A tiny HuBERT saved as a hub checkpoint is (config.json, model.safetensors, preprocessor_config.json)."""
    from transformers import HubertModel, Wav2Vec2FeatureExtractor

    torch.manual_seed(seed)
    HubertModel(build_tiny("hubert", stable=True).config).save_pretrained(path)
    Wav2Vec2FeatureExtractor(do_normalize=True).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def saved_hubert(tmp_path_factory) -> Path:
    return save_hubert(tmp_path_factory.mktemp("tiny_hubert"), seed=3)


@pytest.fixture(scope="module")
def other_hubert(tmp_path_factory) -> Path:
    """The same architecture with other weights (same file names and sizes)."""
    return save_hubert(tmp_path_factory.mktemp("other_hubert"), seed=4)


def hub_cache(root: Path, model: Path, commit: str = COMMIT, ref: str = "main") -> Path:
    """``model``'s files as huggingface_hub caches a download of ``org/tiny`` at ``commit`` (blobs named by
    their sha256, the snapshot's files linking to them, refs/<ref> naming the commit); returns the cache."""
    base = root / "models--org--tiny"
    (base / "blobs").mkdir(parents=True, exist_ok=True)
    (base / "refs").mkdir(exist_ok=True)
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in sorted(model.iterdir()):
        blob = base / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        blob.write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    (base / "refs" / ref).write_text(commit)
    return root


def _answers(upstream) -> tuple:
    return (
        upstream.fingerprint,
        upstream.fingerprint_fields(),
        upstream_info(upstream, "option"),
        upstream.name,
        upstream.family,
        upstream.display_name,
    )


def _inline(family: str, **changes) -> dict:
    return {
        "_target_": "speechbias.upstream.hf.HFUpstream.from_config_dict",
        "model_type": family,
        "family": family,
        "config": tiny_config(family, stable=False),
        "seed": 0,
        "display_name": None,
        **changes,
    }


def _hub(cache: Path, **changes) -> dict:
    return {
        "_target_": "speechbias.upstream.hf.HFUpstream",
        "model_id": "org/tiny",
        "revision": "main",
        "family": "hubert",
        "cache_dir": str(cache),
        "display_name": "tiny hub hubert",
        **changes,
    }


def _local(folder: Path, **changes) -> dict:
    return {"_target_": "speechbias.upstream.hf.HFUpstream", "model_id": str(folder), "family": "hubert", **changes}


def _direct(config: dict) -> HFUpstream:
    kwargs = {k: v for k, v in config.items() if k != "_target_"}
    if "model_type" in kwargs:
        return HFUpstream.from_config_dict(**kwargs)
    return HFUpstream(**kwargs)


def _key(config: dict) -> str:
    """The fingerprint a run's DeferredUpstream gives before any build (checked: nothing built)."""
    deferred = DeferredUpstream(OmegaConf.create(config))
    fingerprint = deferred.fingerprint_without_build()
    assert fingerprint is not None and deferred._upstream is None
    return fingerprint


def test_the_config_and_files_give_the_built_upstreams_identity(tmp_path, saved_hubert, monkeypatch):
    """Each kind of HF upstream: the deferred upstream answers without building, the same as the upstream
    built directly, and its own build agrees (it would raise otherwise)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    hub = _hub(hub_cache(tmp_path / "hub", saved_hubert))
    cases = {
        "inline wav2vec2": _inline("wav2vec2"),
        "inline whisper bf16": _inline("whisper", dtype="bfloat16"),
        "local folder": _local(local),
        "local folder, no family given": _local(local, family=None),
        "hub cache": hub,
        "hub cache, random control": {**hub, "randomize": True, "seed": 4},
    }
    for name, config in cases.items():
        deferred = DeferredUpstream(OmegaConf.create(config))
        answers = _answers(deferred)
        assert deferred._upstream is None, name  # answered from the config and the files
        assert answers == _answers(_direct(config)), name
        deferred.build()  # compares its fingerprint with the one given before
        assert _answers(deferred) == answers, name
    assert DeferredUpstream(_inline("whisper")).fingerprint_fields()["whisper_frames"] == hf_identity.FRAME_TRIM


def test_what_only_a_build_can_tell(tmp_path, saved_hubert, monkeypatch):
    """A hub id not in the local cache, a missing folder, a family other than config.json's: no key
    before the build (which downloads, or says why)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hf_fingerprint_fields("org/tiny", cache_dir=str(tmp_path / "empty-cache")) is None
    assert hf_fingerprint_fields(str(tmp_path / "gone")) is None
    assert hf_fingerprint_fields(str(saved_hubert), family="wav2vec2") is None
    assert hf_fingerprint_fields(str(saved_hubert), family="hubert") is not None
    deferred = DeferredUpstream(_local(saved_hubert, family="wav2vec2"))
    assert deferred.fingerprint_without_build() is None
    with pytest.raises(Exception, match="family 'wav2vec2' was requested but the model config says 'hubert'"):
        deferred.fingerprint_fields()


def test_the_arguments_default_as_the_upstreams_do():
    ours = inspect.signature(hf_fingerprint_fields).parameters
    theirs = inspect.signature(HFUpstream.__init__).parameters
    assert [(p.name, p.default, p.kind) for p in ours.values()] == [
        (p.name, p.default, p.kind) for p in theirs.values() if p.name != "self"
    ]
    assert set(hf_identity.MODEL_TYPES) == set(FAMILIES)


def test_two_revisions_never_share_a_key(tmp_path, saved_hubert, other_hubert, monkeypatch):
    """Two commits of one hub id (other weights): two keys, each the built upstream's; refs/main moved to
    the newer download changes main's key; an unchanged snapshot keeps its key."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = hub_cache(tmp_path / "hub", saved_hubert, commit="c" * 40)
    hub_cache(cache, other_hubert, commit="d" * 40, ref="v2")
    main, v2 = _key(_hub(cache)), _key(_hub(cache, revision="v2"))
    assert main != v2
    assert (main, v2) == (_direct(_hub(cache)).fingerprint, _direct(_hub(cache, revision="v2")).fingerprint)
    assert _key(_hub(cache)) == main  # unchanged: the same key again
    (cache / "models--org--tiny" / "refs" / "main").write_text("d" * 40)
    assert _key(_hub(cache)) != main


def test_a_local_weight_file_written_again_with_its_size_and_mtime_gets_another_key(
    tmp_path, saved_hubert, other_hubert
):
    """Other weights copied over model.safetensors (same name, same size), its mtime set back as `cp -p` or
    rsync would: another key, the built upstream's; an untouched folder keeps its key."""
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    weights = local / "model.safetensors"
    before = _key(_local(local))
    assert _key(_local(local)) == before
    st = weights.stat()
    assert (other_hubert / weights.name).stat().st_size == st.st_size
    assert (other_hubert / weights.name).read_bytes() != weights.read_bytes()
    time.sleep(0.05)  # past the file system's timestamp granularity
    shutil.copyfile(other_hubert / weights.name, weights)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    after = _key(_local(local))
    assert after != before and after == _direct(_local(local)).fingerprint


def test_what_determines_the_outputs_changes_the_key(tmp_path, saved_hubert, monkeypatch):
    """The seed, the dtype, normalize, config.json, the transformers version each change the key; the
    display name and an equal copy of the folder's config node do not."""
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    base = _key(_local(local))
    assert _key(_local(local, display_name="renamed")) == base
    for changed in ({"dtype": "float16"}, {"normalize": False}, {"randomize": True}, {"revision": "v2"}):
        assert _key(_local(local, **changed)) != base, changed
    assert _key(_inline("wav2vec2", seed=1)) != _key(_inline("wav2vec2"))
    hf_config = json.loads((local / "config.json").read_text())
    hf_config["layer_norm_eps"] = 1e-3
    time.sleep(0.05)
    (local / "config.json").write_text(json.dumps(hf_config))
    edited = _key(_local(local))
    assert edited != base
    monkeypatch.setattr(hf_identity, "transformers_version", lambda: "0.0.1")
    assert _key(_local(local)) != edited


def test_files_changed_between_the_key_and_the_build_are_one_error(tmp_path, saved_hubert):
    """The key was given, then the folder's weights were written again before extraction built the model:
    the build refuses to go on under the key given before (its entries would hold other weights)."""
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    deferred = DeferredUpstream(_local(local))
    assert deferred.fingerprint_without_build() is not None and deferred._upstream is None
    time.sleep(0.05)
    (local / "model.safetensors").write_bytes((saved_hubert / "model.safetensors").read_bytes())
    with pytest.raises(RuntimeError, match=r"differs from the one its config gave before the build \(local_files\)"):
        deferred.build()


def _evaluate(tmp_path: Path, model: Path, run: str, *importtime: str) -> subprocess.CompletedProcess:
    return run_entry(
        "evaluate.py",
        "upstream=hf",
        f"model_id={model}",
        "bias_test=demo_accent",
        "speat.n_permutations=2000",
        "logger=none",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / run}",
        python_flags=importtime,
    )


def _imported(stderr: str, module: str) -> bool:
    """Whether ``-X importtime``'s report names ``module`` (at any nesting depth)."""
    return any(line.split("|")[-1].strip() == module for line in stderr.splitlines() if line.startswith("import time:"))


def _row(tmp_path: Path, run: str) -> pd.Series:
    return pd.read_csv(tmp_path / run / "results.csv").iloc[0]


def test_a_warm_hf_run_imports_no_torch_and_a_rewritten_weight_file_is_extracted_again(
    tmp_path, saved_hubert, other_hubert
):
    """As typed, a model in a local folder: the first run extracts (torch), the second, every clip cached,
    imports neither torch nor transformers and writes the same results; after other weights are copied
    over the weight file (size and mtime kept) the third run extracts every clip again."""
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    first = _evaluate(tmp_path, local, "first", "-X", "importtime")
    assert first.returncode == 0, first.stderr[-3000:]
    assert _imported(first.stderr, "torch")
    warm = _evaluate(tmp_path, local, "warm", "-X", "importtime")
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert not _imported(warm.stderr, "torch") and not _imported(warm.stderr, "transformers")
    assert (_row(tmp_path, "first")["n_upstream_forwards"], _row(tmp_path, "warm")["n_upstream_forwards"]) == (40, 0)
    pd.testing.assert_series_equal(
        _row(tmp_path, "first").drop("n_upstream_forwards"), _row(tmp_path, "warm").drop("n_upstream_forwards")
    )

    weights = local / "model.safetensors"
    st = weights.stat()
    time.sleep(0.05)
    shutil.copyfile(other_hubert / weights.name, weights)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    rewritten = _evaluate(tmp_path, local, "rewritten")
    assert rewritten.returncode == 0, rewritten.stderr[-3000:]
    assert _row(tmp_path, "rewritten")["n_upstream_forwards"] == 40
    assert _row(tmp_path, "rewritten")["fingerprint"] != _row(tmp_path, "first")["fingerprint"]
