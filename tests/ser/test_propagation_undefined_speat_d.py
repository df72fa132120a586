"""A bias test whose SpEAT d is undefined (every target clip has the same association with A vs B) does
not end train.py after training: its speat_d is NaN, sign_agrees empty, and one warning names it."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from speechbias.callbacks.propagation import UNDEFINED_SPEAT_D, PropagationCallback, PropagationTest


class _Statistics:
    """Per-layer temporal means (N, L, D), as StackedStatistics.stat gives them."""

    def __init__(self, mean: np.ndarray):
        self.mean = mean

    def stat(self, temporal: str) -> np.ndarray:
        assert temporal == "mean"
        return self.mean


class _Test:
    name = "equal_associations"


def _callback() -> PropagationCallback:
    return PropagationCallback(tests=[], cache=None, fingerprint="f", writer=None, run_info={"upstream": "tiny"})


def _roles() -> np.ndarray:
    return np.array(["X"] * 3 + ["Y"] * 3 + ["A"] * 2 + ["B"] * 2)


def test_equal_associations_give_a_nan_speat_d_and_one_warning(caplog):
    rng = np.random.default_rng(0)
    attributes = rng.standard_normal((2, 1, 4))
    # A and B hold the same two embeddings: every target's association (mean cos with A - with B) is 0
    targets = rng.standard_normal((6, 1, 4))
    mean = np.concatenate([targets, attributes, attributes]).astype(np.float32)
    test = PropagationTest(_Test(), pd.DataFrame({"role": _roles()}))
    with caplog.at_level(logging.WARNING, logger="speechbias.callbacks.propagation"):
        d, source = _callback()._speat_d(test, _Statistics(mean), _roles())
    assert math.isnan(d) and source == UNDEFINED_SPEAT_D
    (record,) = [r for r in caplog.records if "undefined" in r.getMessage()]
    assert "SpEAT d of equal_associations on tiny (mean_sum) is undefined" in record.getMessage()


def test_distinct_associations_give_the_effect_size_of_the_formula():
    rng = np.random.default_rng(1)
    mean = rng.standard_normal((10, 2, 4))
    test = PropagationTest(_Test(), pd.DataFrame({"role": _roles()}))
    d, source = _callback()._speat_d(test, _Statistics(mean), _roles())
    # Caliskan et al.'s d written out: layer sum, cosine associations, pooled SD over X and Y (ddof=1)
    emb = mean.sum(axis=1)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    a, b = unit[6:8], unit[8:10]
    s = (unit @ a.T).mean(axis=1) - (unit @ b.T).mean(axis=1)
    expected = (s[:3].mean() - s[3:6].mean()) / s[:6].std(ddof=1)
    assert source == "computed" and math.isclose(d, expected, rel_tol=1e-9)
