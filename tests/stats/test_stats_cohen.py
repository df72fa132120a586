"""cohens_d(): d and Hedges' g from the formulas, CI coverage by simulation and large-n agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speechbias.stats import CohensDResult, StatsInputError, cohens_d


def d_ref(x, y):
    nx, ny = len(x), len(y)
    mx, my = sum(x) / nx, sum(y) / ny
    vx = sum((v - mx) ** 2 for v in x) / (nx - 1)
    vy = sum((v - my) ** 2 for v in y) / (ny - 1)
    return (mx - my) / math.sqrt(((nx - 1) * vx + (ny - 1) * vy) / (nx + ny - 2))


@pytest.mark.parametrize("nx, ny, seed", [(2, 2, 0), (5, 9, 1), (30, 17, 2)])
def test_d_matches_formula(nx, ny, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(0.5, 2, nx), rng.normal(0, 1, ny)
    result = cohens_d(x, y)
    assert isinstance(result, CohensDResult)
    assert result.value == pytest.approx(d_ref(x.tolist(), y.tolist()), rel=1e-12)
    assert result.d == result.value
    assert (result.n_x, result.n_y, result.hedges, result.ci_level) == (nx, ny, False, 0.95)
    assert result.ci_low < result.value < result.ci_high


@pytest.mark.parametrize("nx, ny", [(4, 3), (10, 12), (50, 60)])
def test_hedges_g_uses_exact_gamma_correction(nx, ny):
    rng = np.random.default_rng(nx)
    x, y = rng.normal(1, 1, nx), rng.normal(0, 1, ny)
    df = nx + ny - 2
    j = math.gamma(df / 2) / (math.sqrt(df / 2) * math.gamma((df - 1) / 2))
    g = cohens_d(x, y, hedges=True)
    d = cohens_d(x, y)
    assert g.hedges
    assert g.value == pytest.approx(j * d.value, rel=1e-12)
    assert g.ci_low == pytest.approx(j * d.ci_low, rel=1e-9)
    assert j == pytest.approx(1 - 3 / (4 * df - 1), abs=2e-3)  # the usual approximation


def test_swapping_samples_negates_d_and_mirrors_ci():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.4, 1, 14), rng.normal(0, 1, 11)
    a, b = cohens_d(x, y), cohens_d(y, x)
    assert b.value == pytest.approx(-a.value)
    assert b.ci_low == pytest.approx(-a.ci_high, rel=1e-8)
    assert b.ci_high == pytest.approx(-a.ci_low, rel=1e-8)


def test_ci_agrees_with_normal_approximation_for_large_samples():
    rng = np.random.default_rng(4)
    nx, ny = 4000, 3000
    x, y = rng.normal(0.3, 1, nx), rng.normal(0, 1, ny)
    result = cohens_d(x, y)
    d = result.value
    se = math.sqrt((nx + ny) / (nx * ny) + d * d / (2 * (nx + ny)))
    assert result.ci_low == pytest.approx(d - 1.959964 * se, abs=0.01 * se + 1e-4)
    assert result.ci_high == pytest.approx(d + 1.959964 * se, abs=0.01 * se + 1e-4)


def test_ci_covers_the_true_effect_at_the_nominal_rate():
    # Simulation under normality: a 90 % interval should cover delta about 90 % of the time.
    rng = np.random.default_rng(5)
    delta, reps = 0.8, 300
    covered = 0
    for _ in range(reps):
        x, y = rng.normal(delta, 1, 8), rng.normal(0, 1, 11)
        r = cohens_d(x, y, ci=0.9)
        covered += r.ci_low <= delta <= r.ci_high
    sigma = math.sqrt(0.9 * 0.1 / reps)
    assert abs(covered / reps - 0.9) < 4 * sigma


@pytest.mark.parametrize(
    "x, y, kwargs, match",
    [
        ([], [1.0, 2.0], {}, "x: is empty"),
        ([1.0], [1.0, 2.0], {}, "x: has 1 value"),
        ([1.0, 2.0], [1.0, np.inf], {}, "y: contains NaN or inf at index 1"),
        ([1.0, 1.0], [2.0, 2.0], {}, "pooled standard deviation 0"),
        ([1.0, 2.0], [1.0, 3.0], {"ci": 0.0}, "ci: must be a number strictly between 0 and 1"),
        ([[1.0, 2.0]], [1.0, 3.0], {}, "x: expected a 1-D array"),
    ],
)
def test_bad_input_raises_value_error(x, y, kwargs, match):
    with pytest.raises(StatsInputError, match=match):
        cohens_d(x, y, **kwargs)
