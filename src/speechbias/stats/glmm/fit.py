"""The public fit: check and reduce the data, then maximise the likelihood (or fit the GLM).

With ``speaker``, the speaker random-intercept model by damped Newton from a per-group
log(errors/words) start; without it, the Poisson GLM with offset log(words) (``method='poisson_glm'``).
"""

from __future__ import annotations

import numpy as np

from speechbias.stats.glmm.design import (
    Units,
    check_design_rank,
    check_no_empty_groups,
    covariate_matrix,
    label_codes,
    reduce_to_units,
    validate_counts,
)
from speechbias.stats.glmm.likelihood import gauss_hermite_rule, method_name
from speechbias.stats.glmm.newton import maximise_loglik
from speechbias.stats.glmm.poisson_glm import fit_glm
from speechbias.stats.glmm.results import PoissonGLMMFit


def _start_params(units: Units, weights) -> np.ndarray:
    """Poisson-GLM start for mu (per-group log of errors/words), gamma = 0, sigma = 0.5."""
    wu = weights[units.cluster]
    ey = np.bincount(units.group, wu * units.y, minlength=units.n_groups)
    ew = np.bincount(units.group, wu * np.exp(units.log_w), minlength=units.n_groups)
    mu = np.log(np.maximum(ey, 0.5) / ew)
    return np.concatenate([mu, np.zeros(units.cov.shape[1]), [0.5]])


def fit_poisson_glmm(
    errors,
    words,
    group,
    speaker=None,
    covariates=None,
    n_agq: int = 1,
) -> PoissonGLMMFit:
    """Fit the speaker random-intercept Poisson model by maximum likelihood.

    ``errors`` (n,) word errors (S + D + I) per utterance, ``words`` (n,) reference words (> 0),
    ``group`` (n,) group labels, ``speaker`` (n,) speaker ids or ``None``, ``covariates`` (n, p)
    array or DataFrame (already numeric; no intercept, groups are cell-means coded).

    ``n_agq=1`` is the Laplace approximation (glmer's default), ``n_agq>1`` adaptive Gauss-Hermite
    quadrature with that many nodes. Without ``speaker`` this is a plain Poisson GLM with offset
    log(words), fitted by statsmodels (``method='poisson_glm'``, ``sigma`` nan).
    """
    y, w = validate_counts(errors, words)
    g_codes, groups = label_codes(group, "group")
    if g_codes.size != y.size:
        raise ValueError(f"group has {g_codes.size} entries, expected {y.size}")
    cov, cov_names = covariate_matrix(covariates, y.size)
    check_no_empty_groups(y, g_codes, groups)
    per_group_obs = {groups[g]: int(n) for g, n in enumerate(np.bincount(g_codes, minlength=len(groups)))}
    if speaker is None:
        return fit_glm(y, w, g_codes, groups, cov, cov_names, per_group_obs)
    s_codes, _ = label_codes(speaker, "speaker")
    if s_codes.size != y.size:
        raise ValueError(f"speaker has {s_codes.size} entries, expected {y.size}")
    units = reduce_to_units(y, w, g_codes, len(groups), s_codes, cov)
    check_design_rank(units, cov_names)
    z, log_wz = gauss_hermite_rule(int(n_agq))
    weights = np.ones(units.n_clusters)
    x0 = _start_params(units, weights)
    x, converged, msg, nit, ll, neg_h = maximise_loglik(units, weights, z, log_wz, x0)
    G, p = len(groups), cov.shape[1]
    spk_per_group = {groups[g]: int(np.unique(s_codes[g_codes == g]).size) for g in range(G)}
    return PoissonGLMMFit(
        groups=groups,
        mu=x[:G].copy(),
        covariate_names=cov_names,
        gamma=x[G : G + p].copy(),
        sigma=float(x[-1]),
        loglik=ll,
        converged=converged,
        message=msg,
        method=method_name(n_agq),
        n_obs=int(y.size),
        n_speakers=units.n_clusters,
        n_speakers_per_group=spk_per_group,
        n_obs_per_group=per_group_obs,
        n_iter=nit,
        neg_hessian=neg_h,
    )
