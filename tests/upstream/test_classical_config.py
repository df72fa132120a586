"""The weight-free baselines' fingerprint fields (their feature-cache keys) and their errors, on both paths:
the built upstream (``FbankUpstream(**config)``) and the config read without a build (``CONFIG_IDENTITIES``).
The expected fields are worked out by hand from the rules: window/hop in samples = round(ms * rate / 1000),
f_max null = rate / 2."""

from __future__ import annotations

import re

import pytest
from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from speechbias.upstream.classical import FbankUpstream, MfccUpstream
from speechbias.upstream.deferred import CONFIG_IDENTITIES, DeferredUpstream
from tests.conftest import CONF_DIR

FBANK, MFCC = "speechbias.upstream.classical.FbankUpstream", "speechbias.upstream.classical.MfccUpstream"
CLASSES = {FBANK: FbankUpstream, MFCC: MfccUpstream}

# conf/upstream/fbank.yaml: 25 ms -> 400 samples, 10 ms -> 160 at 16 kHz; f_max null -> 8000 Hz
SHIPPED_FBANK = {
    "upstream": "fbank",
    "implementation": "speechbias-classical-v1",
    "n_mels": 80,
    "win_length": 400,
    "hop_length": 160,
    "n_fft": 512,
    "f_min": 20.0,
    "f_max": 8000.0,
    "sample_rate": 16000,
    "layer_convention": "single-layer",
}
SHIPPED_MFCC = {**SHIPPED_FBANK, "upstream": "mfcc", "n_mfcc": 40}


def _shipped(name: str, **changes) -> dict:
    """conf/upstream/<name>.yaml as a plain dict, ``changes`` applied."""
    return {**OmegaConf.to_container(OmegaConf.load(CONF_DIR / "upstream" / f"{name}.yaml")), **changes}


@pytest.mark.parametrize(
    "name, changes, expected",
    [
        ("fbank", {}, SHIPPED_FBANK),
        ("mfcc", {}, SHIPPED_MFCC),
        ("fbank", {"n_mels": 40}, {**SHIPPED_FBANK, "n_mels": 40}),
        ("fbank", {"hop_ms": 20}, {**SHIPPED_FBANK, "hop_length": 320}),  # 20 ms * 16 = 320 samples
        ("fbank", {"f_max": 7000}, {**SHIPPED_FBANK, "f_max": 7000.0}),
        ("mfcc", {"n_mfcc": 13}, {**SHIPPED_MFCC, "n_mfcc": 13}),
        # 8 kHz: 25 ms -> 200 samples, 10 ms -> 80, Nyquist 4000 Hz
        (
            "fbank",
            {"sample_rate": 8000},
            {**SHIPPED_FBANK, "sample_rate": 8000, "win_length": 200, "hop_length": 80, "f_max": 4000.0},
        ),
        (
            "mfcc",
            {"win_ms": 12.5, "n_mels": 13, "n_mfcc": 13},
            {**SHIPPED_MFCC, "win_length": 200, "n_mels": 13, "n_mfcc": 13},
        ),
    ],
)
def test_the_fingerprint_fields_are_the_rules_on_both_paths(name, changes, expected):
    config = _shipped(name, **changes)
    target = config.pop("_target_")
    built = CLASSES[target](**config)
    deferred = DeferredUpstream({"_target_": target, **config})
    assert built.fingerprint_fields() == expected
    assert CONFIG_IDENTITIES[target](**config).fields == expected
    assert deferred.fingerprint_fields() == expected and deferred._upstream is None  # no build
    assert deferred.fingerprint == built.fingerprint


def test_the_defaults_are_the_shipped_configs_and_a_users_keywords_work():
    assert FbankUpstream().fingerprint_fields() == CONFIG_IDENTITIES[FBANK]().fields == SHIPPED_FBANK
    assert MfccUpstream().fingerprint_fields() == CONFIG_IDENTITIES[MFCC]().fields == SHIPPED_MFCC
    assert FbankUpstream(n_mels=40).fingerprint_fields() == {**SHIPPED_FBANK, "n_mels": 40}
    assert MfccUpstream(n_mfcc=13, hop_ms=20).fingerprint_fields() == {**SHIPPED_MFCC, "n_mfcc": 13, "hop_length": 320}


@pytest.mark.parametrize(
    "target, changes, message",
    [
        (FBANK, {"randomize": True}, "FbankUpstream has no weights: randomize=true is not defined for it"),
        (MFCC, {"randomize": True}, "MfccUpstream has no weights: randomize=true is not defined for it"),
        (FBANK, {"win_ms": 0.0}, "win_ms=0.0 gives 0 samples; need 0 < window <= n_fft=512"),
        (MFCC, {"win_ms": 33.0}, "win_ms=33.0 gives 528 samples; need 0 < window <= n_fft=512"),  # 33 * 16
        (FBANK, {"win_ms": 25.0, "n_fft": 256}, "win_ms=25.0 gives 400 samples; need 0 < window <= n_fft=256"),
        (FBANK, {"hop_ms": 0.0}, "hop_ms=0.0 gives a hop of 0 samples"),
        (MFCC, {"hop_ms": 0.01}, "hop_ms=0.01 gives a hop of 0 samples"),  # 0.16 samples rounds to 0
        (MFCC, {"n_mfcc": 90}, "n_mfcc=90 must be in 1..n_mels=80"),
        (MFCC, {"n_mfcc": 0}, "n_mfcc=0 must be in 1..n_mels=80"),
        (MFCC, {"n_mels": 40, "n_mfcc": 41}, "n_mfcc=41 must be in 1..n_mels=40"),
        # several faults: the first of randomize, window, hop, n_mfcc (the order of the checks)
        (MFCC, {"randomize": True, "n_mfcc": 90}, "MfccUpstream has no weights: randomize=true is not defined for it"),
        (
            MFCC,
            {"win_ms": 0.0, "hop_ms": 0.0, "n_mfcc": 90},
            "win_ms=0.0 gives 0 samples; need 0 < window <= n_fft=512",
        ),
    ],
)
def test_each_error_is_raised_the_same_by_the_constructor_and_the_config(target, changes, message):
    config = _shipped("fbank" if target == FBANK else "mfcc", **changes)
    del config["_target_"]
    with pytest.raises(ValueError) as by_constructor:
        CLASSES[target](**config)
    with pytest.raises(ValueError) as by_config:
        CONFIG_IDENTITIES[target](**config)
    assert str(by_constructor.value) == str(by_config.value) == message
    with pytest.raises(InstantiationException, match=re.escape(message)):  # a run: the build says why
        DeferredUpstream({"_target_": target, **config}).fingerprint_fields()
