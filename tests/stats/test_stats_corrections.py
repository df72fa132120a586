"""correct_pvalues(): Bonferroni, Holm and Benjamini-Hochberg against loops written from the definitions,
statsmodels' multipletests and R's p.adjust."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from speechbias.stats import StatsInputError, correct_pvalues


def bonferroni_ref(p):
    return [min(1.0, v * len(p)) for v in p]


def holm_ref(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def bh_ref(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i], reverse=True)
    adjusted = [0.0] * m
    running = 1.0
    for position, i in enumerate(order):
        rank = m - position  # 1-based rank in ascending order
        running = min(running, p[i] * m / rank)
        adjusted[i] = min(1.0, running)
    return adjusted


REFERENCES = {"bonferroni": bonferroni_ref, "holm": holm_ref, "bh": bh_ref}


@pytest.mark.parametrize("method", ["bonferroni", "holm", "bh"])
@pytest.mark.parametrize("seed", [0, 1])
def test_adjusted_p_values_match_definitions(method, seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 0.01, 4), rng.uniform(0, 1, 12)])
    rng.shuffle(p)
    result = correct_pvalues(p, method=method, alpha=0.05)
    expected = REFERENCES[method](p.tolist())
    np.testing.assert_allclose(result.p_adjusted, expected, rtol=1e-12)
    np.testing.assert_array_equal(result.reject, np.array(expected) <= 0.05)
    assert (result.method, result.alpha, result.n_tests) == (method, 0.05, 16)


STATSMODELS_NAMES = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh"}
R_NAMES = {"bonferroni": "bonferroni", "holm": "holm", "bh": "BH"}


def _families():
    """p-value families: random, with ties and exact zeros and ones, one p, many near alpha."""
    rng = np.random.default_rng(41)
    yield rng.uniform(0, 1, 30)
    yield np.concatenate([rng.uniform(0, 0.002, 40), rng.uniform(0, 1, 140)])  # 180 pairs, some tiny
    yield np.array([0.01, 0.01, 0.03, 0.03, 0.03, 0.0, 1.0, 0.5, 0.5])
    yield np.array([0.2])
    yield rng.uniform(0.04, 0.06, 25) / 25


@pytest.mark.parametrize("method", ["bonferroni", "holm", "bh"])
def test_adjusted_p_values_and_rejections_equal_statsmodels(method):
    from statsmodels.stats.multitest import multipletests

    for p in _families():
        for alpha in (0.05, 0.1):
            reject, adjusted, _, _ = multipletests(p, alpha=alpha, method=STATSMODELS_NAMES[method])
            result = correct_pvalues(p, method=method, alpha=alpha)
            np.testing.assert_allclose(result.p_adjusted, adjusted, rtol=1e-14, atol=0)
            np.testing.assert_array_equal(result.reject, reject)


@pytest.mark.reference
@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R (Rscript) is not installed")
@pytest.mark.parametrize("method", ["bonferroni", "holm", "bh"])
def test_adjusted_p_values_equal_r_p_adjust(method):
    for p in _families():
        values = ",".join(repr(float(v)) for v in p)
        script = f'cat(sprintf("%.17g", p.adjust(c({values}), method = "{R_NAMES[method]}")), sep = "\\n")'
        out = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True, check=True).stdout
        expected = np.array([float(line) for line in out.split()])
        assert expected.shape == p.shape
        np.testing.assert_allclose(correct_pvalues(p, method=method).p_adjusted, expected, rtol=1e-15, atol=0)


def test_fdr_bh_alias_and_labels_from_mapping_and_series():
    by_name = {"female_male": 0.01, "young_old": 0.04, "us_foreign": 0.03}
    result = correct_pvalues(by_name, method="fdr_bh")
    assert result.method == "bh"
    assert result.labels == ("female_male", "young_old", "us_foreign")
    assert result.as_dict() == pytest.approx(dict(zip(by_name, bh_ref(list(by_name.values())))))
    series = correct_pvalues(pd.Series(by_name), method="holm")
    assert series.labels == tuple(by_name)


def test_ordering_between_methods():
    p = np.array([0.001, 0.01, 0.02, 0.03, 0.2])
    bonf = correct_pvalues(p, "bonferroni").p_adjusted
    holm = correct_pvalues(p, "holm").p_adjusted
    bh = correct_pvalues(p, "bh").p_adjusted
    assert np.all(bh <= holm + 1e-15) and np.all(holm <= bonf + 1e-15)


@pytest.mark.parametrize(
    "p, kwargs, match",
    [
        ([], {}, "pvalues: is empty"),
        ([0.1, 1.2], {}, r"pvalues: must lie in \[0, 1\]; index \[1\]"),
        ([0.1, np.nan], {}, "pvalues: contains NaN"),
        ([0.1], {"method": "sidak"}, "method: must be one of"),
        ([0.1], {"alpha": 1.0}, "alpha: must be a number strictly between 0 and 1"),
    ],
)
def test_bad_input_raises_value_error(p, kwargs, match):
    with pytest.raises(StatsInputError, match=match):
        correct_pvalues(p, **kwargs)
