"""Cohen's d (or Hedges' g) of two independent samples, with a confidence interval.

d = (mean(x) - mean(y)) / s_pooled,  s_pooled**2 = ((n_x - 1) var(x) + (n_y - 1) var(y)) / (n_x + n_y - 2),
variances with ddof = 1. Hedges' g = J * d with the exact small-sample correction
J = Gamma(df / 2) / (sqrt(df / 2) * Gamma((df - 1) / 2)), df = n_x + n_y - 2.

CI method: inversion of the noncentral t distribution (Steiger & Fouladi 1997; Hedges & Olkin
1985). With t = d * sqrt(n_x n_y / (n_x + n_y)) ~ noncentral t(df, lambda), the limits for lambda
solve P(T >= t | lambda_low) = alpha / 2 and P(T <= t | lambda_high) = alpha / 2 and are mapped
back by the same factor (times J for Hedges' g). Exact under normality with equal variances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, special, stats

from speechbias.stats.validation import StatsInputError, as_sample, check_level


@dataclass(frozen=True)
class CohensDResult:
    """Standardised mean difference of x minus y and what produced it.

    ``value``: Cohen's d, or Hedges' g when ``hedges``. ``ci_low``/``ci_high``: ``ci_level``
    interval by noncentral-t inversion. ``pooled_sd``: pooled standard deviation (ddof = 1).
    """

    value: float
    ci_low: float
    ci_high: float
    ci_level: float
    n_x: int
    n_y: int
    pooled_sd: float
    hedges: bool
    ci_method: str = "noncentral t inversion"

    @property
    def d(self) -> float:
        """Alias of ``value`` (Cohen's d, or Hedges' g when ``hedges``)."""
        return self.value


def hedges_correction(df: int) -> float:
    """Exact small-sample bias correction J(df) of Hedges' g."""
    return math.exp(special.gammaln(df / 2.0) - special.gammaln((df - 1) / 2.0)) / math.sqrt(df / 2.0)


def _noncentrality_limit(t: float, df: int, tail_prob: float, lower: bool) -> float:
    """lambda with P(T >= t | lambda) = tail_prob (lower limit) or P(T <= t | lambda) = tail_prob."""

    def excess(lam: float) -> float:
        if lower:
            return stats.nct.sf(t, df, lam) - tail_prob  # increasing in lam
        return tail_prob - stats.nct.cdf(t, df, lam)  # increasing in lam

    width = 2.0 + abs(t)
    lo, hi = t - width, t + width
    for _ in range(60):
        if excess(lo) < 0 < excess(hi):
            return optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500)
        lo, hi = lo - width, hi + width
        width *= 2.0
    raise RuntimeError(f"could not bracket the noncentrality parameter for t={t}, df={df}")


def cohens_d(x, y, hedges: bool = False, ci: float = 0.95) -> CohensDResult:
    """Cohen's d (``hedges=False``) or Hedges' g of ``x`` (n_x,) against ``y`` (n_y,), each n >= 2.

    Positive when x has the larger mean. CI: noncentral-t inversion at level ``ci`` (see module).
    """
    x = as_sample(x, "x", min_size=2)
    y = as_sample(y, "y", min_size=2)
    ci = check_level(ci, "ci")
    n_x, n_y = x.size, y.size
    df = n_x + n_y - 2
    pooled_sd = math.sqrt(((n_x - 1) * x.var(ddof=1) + (n_y - 1) * y.var(ddof=1)) / df)
    if not pooled_sd > 0.0:
        raise StatsInputError("x, y: both samples are constant (pooled standard deviation 0); Cohen's d is undefined")
    d = float((x.mean() - y.mean()) / pooled_sd)
    scale = math.sqrt(n_x * n_y / (n_x + n_y))
    t = d * scale
    alpha = 1.0 - ci
    low = _noncentrality_limit(t, df, alpha / 2.0, lower=True) / scale
    high = _noncentrality_limit(t, df, alpha / 2.0, lower=False) / scale
    factor = hedges_correction(df) if hedges else 1.0
    return CohensDResult(
        value=d * factor,
        ci_low=low * factor,
        ci_high=high * factor,
        ci_level=ci,
        n_x=n_x,
        n_y=n_y,
        pooled_sd=pooled_sd,
        hedges=hedges,
    )
