"""Fingerprint records: a Hugging Face upstream's fingerprint, name and family, answered before any build
from the record its last build left, equal to what the built upstream says (inline configs, a local
folder, a hub id in a Hugging Face cache laid out as huggingface_hub lays it out); missed when anything
that determines it changed; a warm run of evaluate.py imports no torch."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from speechbias.run_context import upstream_info
from speechbias.upstream import fingerprint_records
from speechbias.upstream.deferred import DeferredUpstream
from speechbias.upstream.fingerprint_records import FingerprintRecords, RecordedIdentity, record_inputs
from speechbias.upstream.hf import HFUpstream
from entry_commands import run_entry
from upstream.tiny_models import build_tiny, tiny_config

REPO = Path(__file__).resolve().parents[2]
COMMIT = "c" * 40


@pytest.fixture(scope="module")
def saved_hubert(tmp_path_factory) -> Path:
    """A tiny HuBERT saved as a hub checkpoint is (config.json, model.safetensors, preprocessor_config.json)."""
    from transformers import HubertModel, Wav2Vec2FeatureExtractor

    path = tmp_path_factory.mktemp("tiny_hubert")
    torch.manual_seed(3)
    HubertModel(build_tiny("hubert", stable=True).config).save_pretrained(path)
    Wav2Vec2FeatureExtractor(do_normalize=True).save_pretrained(path)
    return path


def hub_cache(root: Path, model: Path, commit: str = COMMIT, repo: str = "models--org--tiny") -> Path:
    """``model``'s files as huggingface_hub caches a download of ``org/tiny`` at ``commit`` (blobs named by
    their sha256, the snapshot's files linking to them, refs/main naming the commit); returns the cache."""
    base = root / repo
    (base / "blobs").mkdir(parents=True, exist_ok=True)
    (base / "refs").mkdir(exist_ok=True)
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in sorted(model.iterdir()):
        blob = base / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        blob.write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    (base / "refs" / "main").write_text(commit)
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


def _cases(tmp_path: Path, saved_hubert: Path) -> dict[str, tuple[dict, dict]]:
    """name -> (deferred config, the same upstream built directly's keyword arguments)."""
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    cache = hub_cache(tmp_path / "hub", saved_hubert)
    wav2vec2 = _inline("wav2vec2")
    whisper = _inline("whisper", dtype="bfloat16")
    hub = _hub(cache)
    return {
        "inline wav2vec2": (wav2vec2, {k: v for k, v in wav2vec2.items() if k != "_target_"}),
        "inline whisper bf16": (whisper, {k: v for k, v in whisper.items() if k != "_target_"}),
        "local folder": (
            {"_target_": "speechbias.upstream.hf.HFUpstream", "model_id": str(local), "family": "hubert"},
            {"model_id": str(local), "family": "hubert"},
        ),
        "hub cache": (hub, {k: v for k, v in hub.items() if k != "_target_"}),
        "hub cache, random control": ({**hub, "randomize": True, "seed": 4}, {**hub, "randomize": True, "seed": 4}),
    }


def _direct(kwargs: dict) -> HFUpstream:
    kwargs = {k: v for k, v in kwargs.items() if k != "_target_"}
    if "model_type" in kwargs:
        return HFUpstream.from_config_dict(**kwargs)
    return HFUpstream(**kwargs)


def test_a_recorded_fingerprint_is_the_built_upstreams(tmp_path, saved_hubert, monkeypatch):
    """Each kind of HF upstream: the first deferred upstream builds to answer and records; a second one
    answers from the record without building, the same as the upstream built directly (and its own build
    agrees: it would raise otherwise)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name, (config, kwargs) in _cases(tmp_path, saved_hubert).items():
        records = tmp_path / f"features-{name}"
        first = DeferredUpstream(OmegaConf.create(config), feature_cache_dir=str(records))
        assert first.fingerprint_without_build() is None and first._upstream is None, name
        built_answers = _answers(first)
        assert first._upstream is not None, name  # no record yet: built to answer
        assert len(list((records / "upstream_fingerprints").rglob("*.json"))) == 1, name

        second = DeferredUpstream(OmegaConf.create(config), feature_cache_dir=str(records))
        assert _answers(second) == built_answers == _answers(_direct(kwargs)), name
        assert second._upstream is None, name  # answered from the record
        assert DeferredUpstream(config, feature_cache_dir=str(records)).fingerprint_without_build() == first.fingerprint
        second.build()  # the build compares its fingerprint with the record's


def test_a_hub_id_not_in_the_local_cache_has_no_record(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert record_inputs(_hub(tmp_path / "empty-cache")) is None
    assert record_inputs({"_target_": "speechbias.upstream.s3prl.S3prlUpstream", "name": "hubert"}) is None
    assert record_inputs({"_target_": "speechbias.upstream.hf.HFUpstream", "model_id": str(tmp_path / "gone")}) is None


def _record_missed(config: dict, records: Path) -> bool:
    deferred = DeferredUpstream(OmegaConf.create(config), feature_cache_dir=str(records))
    deferred.fingerprint_fields()
    return deferred._upstream is not None


def test_a_record_is_missed_when_what_determines_the_fingerprint_changes(tmp_path, saved_hubert, monkeypatch):
    """The config, the model files (a local folder's, the snapshot a hub revision resolves to), the
    transformers version and the fingerprint code each change the record's inputs: the upstream is built
    again, and a changed config.json gives the built upstream's new fingerprint, not the recorded one."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    records = tmp_path / "features"
    local = tmp_path / "local"
    shutil.copytree(saved_hubert, local)
    local_config = {"_target_": "speechbias.upstream.hf.HFUpstream", "model_id": str(local), "family": "hubert"}
    cache = hub_cache(tmp_path / "hub", saved_hubert)
    for config in (local_config, _hub(cache), _inline("wav2vec2")):
        assert _record_missed(config, records)
        assert not _record_missed(config, records)

    assert _record_missed(_inline("wav2vec2", seed=1), records)
    assert _record_missed(_hub(cache, dtype="float16"), records)

    before = DeferredUpstream(local_config, feature_cache_dir=str(records)).fingerprint_fields()
    hf_config = json.loads((local / "config.json").read_text())
    hf_config["layer_norm_eps"] = 1e-3
    (local / "config.json").write_text(json.dumps(hf_config))
    changed = DeferredUpstream(local_config, feature_cache_dir=str(records))
    after = changed.fingerprint_fields()
    assert changed._upstream is not None and after["config_sha256"] != before["config_sha256"]
    assert after == HFUpstream(model_id=str(local), family="hubert").fingerprint_fields()

    # refs/main moved to another snapshot (a newer download): another commit in the fingerprint
    hub_cache(cache, saved_hubert, commit="d" * 40)
    moved = DeferredUpstream(_hub(cache), feature_cache_dir=str(records))
    assert moved.fingerprint_fields()["resolved_commit"] == "d" * 40 and moved._upstream is not None

    monkeypatch.setattr(fingerprint_records, "_transformers_version", lambda: "0.0.1")
    assert _record_missed(_inline("wav2vec2"), records)
    monkeypatch.undo()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    package = tmp_path / "package"  # the fingerprint code edited (one comment line in hf.py)
    shutil.copytree(fingerprint_records._PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    with (package / "upstream" / "hf.py").open("a") as f:
        f.write("# edited\n")
    code_before = fingerprint_records.fingerprint_code_sha256()
    monkeypatch.setattr(fingerprint_records, "_PACKAGE", package)
    assert fingerprint_records.fingerprint_code_sha256() != code_before
    assert _record_missed(_inline("wav2vec2"), records)


def test_a_corrupt_record_is_warned_about_once_and_replaced(tmp_path, caplog):
    records = tmp_path / "features"
    config = _inline("wav2vec2")
    assert _record_missed(config, records)
    (path,) = (records / "upstream_fingerprints").rglob("*.json")
    path.write_text(path.read_text().replace('"family": "wav2vec2"', '"family": "hubert"', 1))
    with caplog.at_level(logging.WARNING):
        assert _record_missed(config, records)  # the checksum fails: built again, record rewritten
    assert [r.message for r in caplog.records if "unusable (checksum mismatch)" in r.message]
    assert not _record_missed(config, records)


def test_a_record_the_build_contradicts_is_an_error_naming_it_and_is_removed(tmp_path):
    """A record whose fields are not the built upstream's (inputs that missed a determinant): the build
    that follows (extraction) raises one line naming the record and removes it."""
    records = tmp_path / "features"
    config = _inline("wav2vec2")
    built = DeferredUpstream(config, feature_cache_dir=str(records))
    fields = built.fingerprint_fields()
    inputs = record_inputs(config)
    store = FingerprintRecords(records)
    path = store.remember(inputs, RecordedIdentity({**fields, "dtype": "float64"}, built.name, None, "wav2vec2"))
    deferred = DeferredUpstream(config, feature_cache_dir=str(records))
    assert deferred.fingerprint_fields()["dtype"] == "float64" and deferred._upstream is None
    with pytest.raises(RuntimeError, match=rf"fingerprint record {path} differs from the built upstream \(dtype\)"):
        deferred.build()
    assert not path.exists()


def _evaluate(tmp_path: Path, run: str, *importtime: str) -> subprocess.CompletedProcess:
    return run_entry(
        "evaluate.py",
        "upstream=tiny_wav2vec2",
        "bias_test=demo_accent",
        "speat.n_permutations=2000",
        "logger=none",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / run}",
        python_flags=importtime,
    )


def _imports_torch(stderr: str) -> bool:
    return any(line.rstrip().endswith("| torch") for line in stderr.splitlines() if line.startswith("import time:"))


def test_a_warm_hf_run_imports_no_torch(tmp_path):
    """As typed: the first run extracts (torch), the second, every clip cached, imports neither torch nor
    transformers and writes the same results."""
    first = _evaluate(tmp_path, "first", "-X", "importtime")
    assert first.returncode == 0, first.stderr[-3000:]
    assert _imports_torch(first.stderr)
    warm = _evaluate(tmp_path, "warm", "-X", "importtime")
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert not _imports_torch(warm.stderr)
    assert not any(line.rstrip().endswith("| transformers") for line in warm.stderr.splitlines())
    first_row = pd.read_csv(tmp_path / "first/results.csv").iloc[0]
    warm_row = pd.read_csv(tmp_path / "warm/results.csv").iloc[0]
    assert (first_row["n_upstream_forwards"], warm_row["n_upstream_forwards"]) == (40, 0)
    pd.testing.assert_series_equal(first_row.drop("n_upstream_forwards"), warm_row.drop("n_upstream_forwards"))


def test_a_cache_that_takes_no_record_only_costs_a_build(tmp_path, caplog):
    """A feature cache folder that cannot take the record (here a file where the folder should be, a real
    OSError): the upstream is built and answers, the run goes on, and nothing is recorded."""
    blocked = tmp_path / "features"
    blocked.write_text("not a folder")
    deferred = DeferredUpstream(_inline("wav2vec2"), feature_cache_dir=str(blocked))
    with caplog.at_level(logging.INFO):
        fields = deferred.fingerprint_fields()
    assert fields == _direct(_inline("wav2vec2")).fingerprint_fields()
    assert [r.message for r in caplog.records if "not recorded" in r.message]
