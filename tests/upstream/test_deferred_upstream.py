"""DeferredUpstream: the task's upstream before it is built. A weight-free baseline's fingerprint and identity
come from its config (no torch imported), equal to the built upstream's (an HF upstream's: test_hf_identity.py);
anything else is built to answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from speechbias.run_context import upstream_info
from speechbias.upstream.deferred import CONFIG_IDENTITIES, WEIGHT_FREE_TARGETS, DeferredUpstream, built_upstream

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


def test_every_config_identity_target_is_an_upstream_that_exists():
    from hydra.utils import get_method

    from speechbias.upstream.base import Upstream

    for target in CONFIG_IDENTITIES:
        made = get_method(target)
        assert issubclass(made if isinstance(made, type) else made.__self__, Upstream), target
    assert WEIGHT_FREE_TARGETS < CONFIG_IDENTITIES.keys()
    assert {get_method(t).__module__ for t in WEIGHT_FREE_TARGETS} == {"speechbias.upstream.classical"}


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
    deferred = DeferredUpstream({"_target_": "core.toy_upstream.ToyUpstream", "seed": 3})
    assert deferred.fingerprint_without_build() is None and deferred._upstream is None
    fingerprint = deferred.fingerprint
    assert deferred._upstream is not None and fingerprint == deferred.build().fingerprint
    assert (deferred.name, deferred.family) == ("toy", "other")  # the built ToyUpstream's


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


def test_the_weight_free_parameters_are_declared_once_in_the_config_classes():
    """The constructors take the config dataclasses' fields (names, defaults) and nothing else, and the config
    path reads the same dataclasses: a default changed in the one place changes both, so no key can differ."""
    import dataclasses
    import inspect

    from speechbias.upstream.classical import FbankUpstream, MfccUpstream
    from speechbias.upstream.classical_fingerprint import FbankConfig, MfccConfig

    for upstream, config_class in ((FbankUpstream, FbankConfig), (MfccUpstream, MfccConfig)):
        shown = [(p.name, p.default) for p in inspect.signature(upstream).parameters.values()]
        assert shown == [(f.name, f.default) for f in dataclasses.fields(config_class)]
        assert upstream.config_class is config_class and type(upstream().config) is config_class
        refusals = []  # a key the dataclass lacks: both paths are refused by the dataclass itself
        for path in (upstream, CONFIG_IDENTITIES[f"speechbias.upstream.classical.{upstream.__name__}"]):
            with pytest.raises(TypeError, match=f"{config_class.__name__}.__init__.* 'no_such_option'") as refused:
                path(no_such_option=1)
            refusals.append(str(refused.value))
        assert refusals[0] == refusals[1]
    assert [f.name for f in dataclasses.fields(MfccConfig)] == [f.name for f in dataclasses.fields(FbankConfig)] + [
        "n_mfcc"
    ]
    assert MfccUpstream(n_mels=40, n_mfcc=13).config == MfccConfig(n_mels=40, n_mfcc=13)
