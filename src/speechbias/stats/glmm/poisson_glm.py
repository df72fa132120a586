"""The model without a speaker effect: a Poisson GLM with offset log(words), fitted by statsmodels.

Used when no speaker column is given and by the utterance bootstrap. Rows with the same design
row are collapsed first (exact for the Poisson likelihood up to its constant).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

from speechbias.stats.glmm.results import PoissonGLMMFit


# IRLS stopping and acceptance are judged on the problem's own scale: Poisson deviance and score
# terms grow with the error counts, so an absolute tolerance (statsmodels' default criterion:
# successive deviances within ``tol``) is below float rounding for a corpus with ~1e5 errors and
# a saturated fit never "converges" although it sits on the closed form.
GLM_RTOL = 1e-10


@dataclass(frozen=True)
class GLMResult:
    """IRLS estimate (group mu then gamma, log scale), whether it was accepted, and why."""

    params: np.ndarray
    converged: bool
    message: str
    n_iter: int


def fit_glm_arrays(y, w, g_codes, G, cov, freq, start, rtol: float = GLM_RTOL) -> GLMResult:
    """statsmodels Poisson GLM with offset log(w) on rows collapsed by identical design rows.

    Convergence is scale-aware: IRLS stops when successive deviances agree within
    ``rtol * (1 + sum y)`` (the deviance's scale), and the fit is accepted only if every score
    component ``|X'(y - lambda)|`` is below ``sqrt(rtol) * (1 + sum y)`` at the estimate.
    """
    keep = freq > 0
    key = np.column_stack([g_codes[keep].astype(float), cov[keep]])
    _, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    k = int(inv.max()) + 1
    uy = np.bincount(inv, freq[keep] * y[keep], minlength=k)
    uw = np.bincount(inv, freq[keep] * w[keep], minlength=k)
    first = np.zeros(k, dtype=np.int64)
    first[inv] = np.arange(inv.size)
    X = np.column_stack([np.eye(G)[g_codes[keep][first]], cov[keep][first]])
    model = sm.GLM(uy, X, family=sm.families.Poisson(), offset=np.log(uw))
    scale = 1.0 + float(uy.sum())
    with warnings.catch_warnings():
        # cell-means design collapsed to one row per group is saturated: statsmodels warns about
        # "perfect prediction" and a zero residual df, which is expected here and harmless
        warnings.simplefilter("ignore", category=PerfectSeparationWarning)
        warnings.simplefilter("ignore", category=RuntimeWarning)
        res = model.fit(start_params=start, maxiter=100, tol=rtol * scale, rtol=rtol)
    params = np.asarray(res.params, dtype=float)
    n_iter = int(getattr(res, "fit_history", {}).get("iteration", 0))
    if not np.all(np.isfinite(params)):
        return GLMResult(params, False, "IRLS gave non-finite estimates", n_iter)
    score = np.abs(X.T @ (uy - uw * np.exp(X @ params)))
    worst = float(score.max()) / scale
    if not res.converged:
        return GLMResult(
            params,
            False,
            f"IRLS did not converge in {n_iter} iterations (deviance change "
            f"above {rtol:g} x (1 + total errors); max |score| / (1 + total errors) = {worst:.2g})",
            n_iter,
        )
    if worst > math.sqrt(rtol):
        return GLMResult(
            params,
            False,
            f"IRLS stopped away from the optimum (max |score| / (1 + total errors) "
            f"= {worst:.2g} > {math.sqrt(rtol):g})",
            n_iter,
        )
    return GLMResult(
        params, True, f"IRLS converged in {n_iter} iterations (max |score| / (1 + total errors) = {worst:.2g})", n_iter
    )


def fit_glm(y, w, g_codes, groups, cov, cov_names, per_group_obs) -> PoissonGLMMFit:
    """The model without a speaker effect as a :class:`PoissonGLMMFit` (``sigma`` nan, no Hessian)."""
    G = len(groups)
    res = fit_glm_arrays(y, w, g_codes, G, cov, np.ones(y.size), None)
    params = res.params
    # full (per-utterance) Poisson log-likelihood; collapsing rows changes only the constant
    mu_obs = w * np.exp(params[:G][g_codes] + (cov @ params[G:] if cov.shape[1] else 0.0))
    ll = float(np.sum(y * np.log(mu_obs) - mu_obs - special.gammaln(y + 1.0)))
    return PoissonGLMMFit(
        groups=groups,
        mu=params[:G].copy(),
        covariate_names=cov_names,
        gamma=params[G:].copy(),
        sigma=float("nan"),
        loglik=ll,
        converged=res.converged,
        message=res.message,
        method="poisson_glm",
        n_obs=int(y.size),
        n_speakers=0,
        n_speakers_per_group={},
        n_obs_per_group=per_group_obs,
        n_iter=res.n_iter,
    )
