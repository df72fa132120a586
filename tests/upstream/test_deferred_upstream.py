"""DeferredUpstream: the task's upstream before it is built. A weight-free baseline's fingerprint and identity
come from its config (no torch imported), equal to the built upstream's; anything else is built to answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from speechbias.run_context import upstream_info
from speechbias.upstream.deferred import CONFIG_FINGERPRINTS, DeferredUpstream, built_upstream

REPO = Path(__file__).resolve().parents[2]


def _config(name: str, **changes):
    cfg = OmegaConf.load(REPO / "conf" / "upstream" / f"{name}.yaml")
    for key, value in changes.items():
        cfg[key] = value
    return cfg


@pytest.mark.parametrize(
    "name, changes",
    [
        ("fbank", {}),
        ("mfcc", {}),
        ("fbank", {"n_mels": 40, "f_max": 7000.0}),
        ("fbank", {"win_ms": 20, "hop_ms": 5}),
        ("mfcc", {"n_mfcc": 13, "display_name": None}),
        ("fbank", {"sample_rate": 8000}),
    ],
)
def test_a_weight_free_upstreams_config_gives_the_built_upstreams_fingerprint(name, changes):
    deferred = DeferredUpstream(_config(name, **changes))
    before = (deferred.fingerprint, deferred.fingerprint_fields(), upstream_info(deferred, name), deferred.name)
    assert deferred._upstream is None  # answered from the config
    built = deferred.build()
    assert before == (built.fingerprint, built.fingerprint_fields(), upstream_info(built, name), built.name)
    assert built_upstream(deferred) is built and built_upstream(built) is built


def test_every_config_fingerprint_target_is_a_class_that_exists():
    from hydra.utils import get_class

    for target in CONFIG_FINGERPRINTS:
        assert get_class(target).__module__ == "speechbias.upstream.classical"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"win_ms": 0.0}, "win_ms=0.0 gives 0 samples"),
        ({"randomize": True}, "has no weights"),
        ({"n_mfcc": 90}, "n_mfcc=90 must be in 1..n_mels=80"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_a_bad_config_fails_as_building_it_fails(changes, message):
    deferred = DeferredUpstream(_config("mfcc", **changes))
    with pytest.raises(InstantiationException, match=message):
        deferred.fingerprint_fields()


def test_another_upstream_is_built_to_tell_its_fingerprint():
    deferred = DeferredUpstream(_config("tiny_wav2vec2"))
    fingerprint = deferred.fingerprint
    assert deferred._upstream is not None and fingerprint == deferred.build().fingerprint
    assert not deferred.build().is_built  # an HF upstream stays lazy: config read, no weights


def test_a_config_without_target_is_one_clear_error():
    with pytest.raises(ValueError, match="needs a _target_"):
        DeferredUpstream({"n_mels": 80})


def test_a_deferred_weight_free_upstream_imports_no_torch():
    code = (
        "import sys; from omegaconf import OmegaConf; from speechbias.upstream.deferred import DeferredUpstream; "
        "from speechbias.run_context import upstream_info; "
        "u = DeferredUpstream(OmegaConf.load('conf/upstream/fbank.yaml')); print(upstream_info(u, 'fbank')); "
        "print(sorted(m for m in ('torch', 'transformers', 'pytorch_lightning') if m in sys.modules))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "[]"
