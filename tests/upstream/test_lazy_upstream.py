"""A lazy HF upstream: shape and fingerprint from the config, weights loaded only at the first forward,
and a warm run (every clip cached) that builds no model and reads no weights."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch

from speechbias.upstream.hf import HFUpstream
from entry_commands import run_entry
from upstream.tiny_models import build_tiny

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    from transformers import HubertModel

    path = tmp_path_factory.mktemp("tiny_hubert")
    torch.manual_seed(3)  # an unbaked transformers model, saved as a hub checkpoint would be
    HubertModel(build_tiny("hubert", stable=True).config).save_pretrained(path)
    return path


@pytest.mark.parametrize("family, stable", [("wav2vec2", False), ("whisper", False)])
def test_shape_and_fingerprint_need_no_model(family, stable):
    lazy = build_tiny(family, stable=stable, seed=0)
    shape = (lazy.num_layers, lazy.hidden_size, lazy.frame_rate, lazy.fingerprint)
    assert not lazy.is_built
    hidden, _ = lazy(torch.randn(1, 16000) * 0.1, torch.tensor([16000]))
    assert lazy.is_built
    # what was stated before the build is what the built model gives
    assert len(hidden) == shape[0] and hidden[0].shape[-1] == shape[1]
    assert (lazy.num_layers, lazy.hidden_size, lazy.frame_rate, lazy.fingerprint) == shape


def test_weights_are_read_at_the_first_forward_only(saved_tiny, monkeypatch):
    from transformers import HubertModel

    loads = []
    original = HubertModel.from_pretrained.__func__
    monkeypatch.setattr(
        HubertModel, "from_pretrained", classmethod(lambda cls, *a, **k: loads.append(a) or original(cls, *a, **k))
    )
    upstream = HFUpstream(model_id=str(saved_tiny))
    assert upstream.fingerprint and upstream.num_layers == 3 and loads == []
    wavs = torch.randn(2, 8000) * 0.1
    upstream(wavs, torch.tensor([8000, 6000]))
    upstream(wavs, torch.tensor([8000, 6000]))
    assert len(loads) == 1
    # the loaded weights are the saved ones (weight norm baked, as HFUpstream does)
    from speechbias.upstream.hf import _bake_parametrizations

    reference = HubertModel.from_pretrained(saved_tiny)
    _bake_parametrizations(reference)
    assert upstream.model.state_dict().keys() == reference.state_dict().keys()
    for name, value in reference.state_dict().items():
        assert torch.equal(upstream.model.state_dict()[name], value), name


def test_a_model_built_after_to_lands_on_the_upstreams_dtype_and_device():
    upstream = build_tiny("wavlm", seed=0, dtype="bfloat16").to("cpu")
    assert not upstream.is_built
    assert next(upstream.model.parameters()).dtype == torch.bfloat16
    assert next(upstream.model.parameters()).device == upstream._device_probe.device


def _evaluate(tmp_path: Path, model_dir: Path, *extra: str, python_flags=()) -> subprocess.CompletedProcess:
    return run_entry(
        "evaluate.py",
        "upstream=hf",
        f"model_id={model_dir}",
        "bias_test=demo_accent",
        "speat.n_permutations=2000",
        "speat.per_layer=false",
        "logger=none",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        *extra,
        python_flags=python_flags,
    )


def test_a_warm_run_reads_no_weights(tmp_path, saved_tiny):
    """The second run has every clip cached (``force=true``: its statistics computed again): it imports
    neither torch nor transformers, without which no weights can be loaded, and gives the first run's d. (A weights file written again is another cache key: tests/upstream/test_hf_identity.py.)"""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for f in saved_tiny.iterdir():
        (model_dir / f.name).write_bytes(f.read_bytes())
    first = _evaluate(tmp_path, model_dir)
    assert first.returncode == 0, first.stderr[-3000:]
    d_first = pd.read_csv(tmp_path / "run" / "results.csv").loc[0, "d"]

    again = _evaluate(tmp_path, model_dir, "force=true", python_flags=("-X", "importtime"))
    assert again.returncode == 0, again.stderr[-3000:]
    imported = {line.split("|")[-1].strip() for line in again.stderr.splitlines() if line.startswith("import time:")}
    assert "speechbias.upstream.hf_identity" in imported  # the key came from the config and the files
    assert not imported & {"torch", "transformers"}
    assert pd.read_csv(tmp_path / "run" / "results.csv").loc[0, "d"] == pytest.approx(d_first, abs=1e-12)
