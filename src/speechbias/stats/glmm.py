"""Mixed-effects Poisson regression of word errors with one random intercept per speaker.

Model (Fair-Speech, Veliche et al. 2024; after Liu et al., "Model-based approach for measuring the
fairness in ASR", 2022)::

    errors_ij ~ Poisson(lambda_ij)
    log lambda_ij = log(words_ij) + mu_group(ij) + c_ij' gamma + r_i,     r_i ~ N(0, sigma^2)

``i`` is the speaker, ``j`` the utterance, ``words`` the number of reference words (the offset),
``mu`` one log-WER per group (cell-means coding, no intercept), ``c`` optional covariates.
``exp(mu_a - mu_b)`` is the WER ratio of group a to group b for the same speaker effect and
covariates. Fitted by maximum likelihood with the marginal likelihood's per-speaker 1-D integrals
approximated by the Laplace method (``n_agq=1``) or adaptive Gauss-Hermite quadrature
(``n_agq>1``), exactly as ``lme4::glmer(..., nAGQ=n_agq)`` defines them (random effect in the
spherical parametrisation ``r = sigma * u``, nodes centred at the conditional mode of ``u`` and
scaled by the conditional curvature).

Why hand-written: no maintained Python library fits this model by maximum likelihood.
statsmodels' ``PoissonBayesMixedGLM`` is a variational-Bayes estimator without an offset (its
posterior SDs are far too small), pymer4 calls R, and fitting a Gaussian mixed model to per-utterance
WER (as ASR-FairBench does) is a different model. With one scalar random intercept the likelihood
reduces exactly to per-speaker sufficient statistics: given the fixed effects, speaker i's
integral depends only on ``Y_i`` (its total errors) and ``a_i = log sum_j exp(eta_ij)``, and the
conditional mode has a closed form through the Wright omega function, so the objective and its
analytic gradient cost O(units) numpy operations; a damped Newton loop maximises it.

Cluster bootstrap: resampling speakers with replacement and giving a speaker drawn k times k new
ids is the same likelihood as weighting that speaker's marginal log-likelihood by k (speakers are
independent given the parameters), so replicates are fitted as speaker-weighted likelihoods
without copying data (tested against explicit duplication).

Conventions: ``mu`` and ``gamma`` on the log scale; ``sigma`` is the SD of the speaker intercept
(log scale). Log-likelihoods are full Poisson log-likelihoods (including ``-log y!``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

__all__ = [
    "PoissonGLMMFit",
    "RatioBootstrap",
    "fit_poisson_glmm",
    "pairwise_wer_ratios",
    "bootstrap_wer_ratios",
]

# --------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class PoissonGLMMFit:
    """A fitted WER model. ``mu[g]`` is the log WER of ``groups[g]`` (speaker effect 0, covariates 0)."""

    groups: tuple[str, ...]
    mu: np.ndarray
    covariate_names: tuple[str, ...]
    gamma: np.ndarray
    sigma: float  # SD of the speaker intercept; nan when fitted without a speaker effect
    loglik: float
    converged: bool
    message: str
    method: str  # "laplace", "aghq(<n>)" or "poisson_glm"
    n_obs: int
    n_speakers: int  # 0 when fitted without a speaker effect
    n_speakers_per_group: dict = field(default_factory=dict)
    n_obs_per_group: dict = field(default_factory=dict)
    n_iter: int = 0
    # negative Hessian of the log-likelihood at the estimate, over (mu, gamma, sigma); None for the GLM
    neg_hessian: np.ndarray | None = field(default=None, repr=False, compare=False)

    def wald_se(self) -> np.ndarray:
        """Asymptotic standard errors of (mu, gamma, sigma) from the observed information."""
        if self.neg_hessian is None:
            raise ValueError("no Hessian stored for this fit (Poisson GLM)")
        return np.sqrt(np.diag(np.linalg.inv(self.neg_hessian)))

    @property
    def has_speaker_effect(self) -> bool:
        return self.method != "poisson_glm"

    def ratio(self, a: str, b: str) -> float:
        """WER ratio exp(mu_a - mu_b) of group ``a`` to group ``b``."""
        ia, ib = self.groups.index(a), self.groups.index(b)
        return float(np.exp(self.mu[ia] - self.mu[ib]))

    def params(self) -> np.ndarray:
        """Flat parameter vector (mu, gamma, sigma) as used for warm starts."""
        s = 0.0 if not np.isfinite(self.sigma) else self.sigma
        return np.concatenate([self.mu, self.gamma, [s]])


@dataclass(frozen=True)
class RatioBootstrap:
    """Pairwise WER ratios with percentile bootstrap CIs.

    ``table`` columns: group_a, group_b, ratio (full-data estimate), ci_low, ci_high, significant
    (CI excludes 1 and is not degenerate), degenerate (the CI is not finite or has zero width, or a
    group has fewer than two resampling units, so the resampling cannot show its variability),
    se_log_ratio (bootstrap SD of mu_a - mu_b). ``replicates`` is (n_ok, n_groups) of bootstrap
    mu estimates.
    """

    table: pd.DataFrame
    replicates: np.ndarray
    n_resamples: int
    n_failed: int
    failures: dict
    seed: int
    confidence: float
    resampling: str


# --------------------------------------------------------------------------------------------
# data reduction


@dataclass(frozen=True)
class _Units:
    """Data reduced to units (distinct speaker x design-row cells) and per-cluster sums."""

    cluster: np.ndarray  # (U,) int cluster (speaker) code of each unit
    group: np.ndarray  # (U,) int group code
    cov: np.ndarray  # (U, p) covariates
    y: np.ndarray  # (U,) errors summed over the unit's utterances
    log_w: np.ndarray  # (U,) log of reference words summed over the unit's utterances
    cluster_y: np.ndarray  # (S,) errors per cluster
    cluster_const: np.ndarray  # (S,) sum_j [y_ij log w_ij - log y_ij!] per cluster
    cluster_group: np.ndarray  # (S,) group code of each cluster (-1 when it spans groups)
    n_clusters: int
    n_groups: int


def _codes(values, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    labels, codes = np.unique(arr.astype(str), return_inverse=True)
    return codes.astype(np.int64), tuple(str(x) for x in labels)


def _validate_counts(errors, words) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(errors, dtype=float)
    w = np.asarray(words, dtype=float)
    if y.ndim != 1 or w.shape != y.shape:
        raise ValueError(f"errors and words must be 1-D of equal length, got {y.shape} and {w.shape}")
    if y.size == 0:
        raise ValueError("no observations: errors is empty")
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0) | (y != np.round(y)))
    if bad.size:
        raise ValueError(f"errors must be non-negative integers; bad value(s) at row(s) {bad[:10].tolist()}")
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if bad.size:
        raise ValueError(f"words (reference word counts) must be positive; bad value(s) at row(s) {bad[:10].tolist()}")
    return y, w


def _covariates(covariates, n: int) -> tuple[np.ndarray, tuple[str, ...]]:
    if covariates is None:
        return np.zeros((n, 0)), ()
    if isinstance(covariates, pd.DataFrame):
        names = tuple(str(c) for c in covariates.columns)
        cov = covariates.to_numpy(dtype=float)
    else:
        cov = np.asarray(covariates, dtype=float)
        if cov.ndim == 1:
            cov = cov[:, None]
        names = tuple(f"x{k}" for k in range(cov.shape[1]))
    if cov.shape[0] != n:
        raise ValueError(f"covariates have {cov.shape[0]} rows, expected {n}")
    if not np.all(np.isfinite(cov)):
        raise ValueError("covariates contain NaN or infinite values")
    return cov, names


def _reduce(y, w, group_codes, n_groups, cluster_codes, cov) -> _Units:
    """Collapse utterances sharing (cluster, group, covariate row): exact for the Poisson likelihood."""
    n_clusters = int(cluster_codes.max()) + 1
    const_obs = y * np.log(w) - special.gammaln(y + 1.0)
    cluster_const = np.bincount(cluster_codes, const_obs, minlength=n_clusters)
    cluster_y = np.bincount(cluster_codes, y, minlength=n_clusters)
    key = np.column_stack([cluster_codes.astype(float), group_codes.astype(float), cov])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    n_units = first.size
    uy = np.bincount(inverse, y, minlength=n_units)
    uw = np.bincount(inverse, w, minlength=n_units)
    cg = np.full(n_clusters, -1, dtype=np.int64)
    gmin = np.full(n_clusters, np.iinfo(np.int64).max)
    gmax = np.full(n_clusters, -1)
    np.minimum.at(gmin, cluster_codes, group_codes)
    np.maximum.at(gmax, cluster_codes, group_codes)
    single = gmin == gmax
    cg[single] = gmin[single]
    return _Units(
        cluster=cluster_codes[first], group=group_codes[first], cov=cov[first], y=uy, log_w=np.log(uw),
        cluster_y=cluster_y, cluster_const=cluster_const, cluster_group=cg,
        n_clusters=n_clusters, n_groups=n_groups,
    )


# --------------------------------------------------------------------------------------------
# marginal likelihood


def _method_name(n_agq: int) -> str:
    return "laplace" if int(n_agq) == 1 else f"aghq({int(n_agq)})"


def _gh_rule(n_agq: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z_k and log weights of the n-point Gauss-Hermite rule for the N(0, 1) density."""
    if n_agq < 1:
        raise ValueError(f"n_agq must be >= 1 (1 = Laplace), got {n_agq}")
    if n_agq == 1:
        return np.zeros(1), np.zeros(1)
    z, wts = np.polynomial.hermite_e.hermegauss(n_agq)
    return z, np.log(wts / math.sqrt(2.0 * math.pi))


def _speaker_terms(Y, a, sigma: float, z, log_wz):
    """Per-speaker approximate log integral and its derivatives.

    For speaker totals ``Y`` (S,) and ``a = log sum_j exp(eta_j)`` (S,) (eta without the random
    effect), with ``f(u) = Y s u - exp(s u + a) - u^2/2`` and ``s = |sigma|``, returns
    ``Q = log int exp(f(u)) phi(u) du`` approximated by AGHQ at the mode (Laplace for one node),
    and ``dQ/da`` (S,), ``dQ/dsigma`` (S,) (total derivatives through the mode and curvature).
    The likelihood is even in sigma, so sigma may be optimised unconstrained.
    """
    sign = 1.0 if sigma >= 0 else -1.0
    sigma = abs(sigma)
    if sigma == 0.0:
        m = np.exp(a)
        return -m, -m, np.zeros_like(a)
    s2 = sigma * sigma
    # conditional mode: Y sigma - sigma exp(sigma u + a) - u = 0  =>  u = Y sigma - W(.)/sigma,
    # W(exp(x)) = wrightomega(x) (stable for large x); one Newton step polishes it.
    u = Y * sigma - special.wrightomega(2.0 * math.log(sigma) + s2 * Y + a) / sigma
    m = np.exp(sigma * u + a)
    u = u + (Y * sigma - sigma * m - u) / (s2 * m + 1.0)
    m = np.exp(sigma * u + a)
    h = s2 * m + 1.0
    u_a = -sigma * m / h
    u_s = (Y - m - sigma * u * m) / h
    h_a = s2 * m * (1.0 + sigma * u_a)
    h_s = 2.0 * sigma * m + s2 * m * (u + sigma * u_s)
    if z.size == 1:  # Laplace: one node at the mode, where f_u = 0
        q = Y * sigma * u - m - 0.5 * u * u - 0.5 * np.log(h)
        return q, -0.5 * h_a / h - m, sign * (-0.5 * h_s / h + u * (Y - m))
    sq = np.sqrt(h)
    uk = u[:, None] + z[None, :] / sq[:, None]
    mk = np.exp(sigma * uk + a[:, None])
    fk = Y[:, None] * sigma * uk - mk - 0.5 * uk * uk
    lk = log_wz[None, :] + fk + 0.5 * z[None, :] ** 2
    lse = special.logsumexp(lk, axis=1)
    pk = np.exp(lk - lse[:, None])
    q = -0.5 * np.log(h) + lse
    fu_k = Y[:, None] * sigma - sigma * mk - uk
    scale = (0.5 * z[None, :]) / (h * sq)[:, None]
    duk_a = u_a[:, None] - scale * h_a[:, None]
    duk_s = u_s[:, None] - scale * h_s[:, None]
    dq_a = -0.5 * h_a / h + np.sum(pk * (-mk + fu_k * duk_a), axis=1)
    dq_s = -0.5 * h_s / h + np.sum(pk * (Y[:, None] * uk - uk * mk + fu_k * duk_s), axis=1)
    return q, dq_a, sign * dq_s


def _loglik_and_grad(params, units: _Units, weights, z, log_wz):
    """Weighted marginal log-likelihood and its gradient w.r.t. (mu, gamma, sigma)."""
    G = units.n_groups
    p = units.cov.shape[1]
    mu = params[:G]
    gamma = params[G:G + p]
    sigma = float(params[-1])
    lin = mu[units.group] + (units.cov @ gamma if p else 0.0)
    eta = units.log_w + lin
    shift = float(eta.max())
    e = np.exp(eta - shift)
    s_sum = np.bincount(units.cluster, e, minlength=units.n_clusters)
    a = np.log(s_sum) + shift
    q, dq_a, dq_s = _speaker_terms(units.cluster_y, a, sigma, z, log_wz)
    wu = weights[units.cluster]
    ll = float(np.dot(weights, units.cluster_const + q) + np.dot(wu, units.y * lin))
    r = wu * (units.y + dq_a[units.cluster] * e / s_sum[units.cluster])
    grad = np.empty(G + p + 1)
    grad[:G] = np.bincount(units.group, r, minlength=G)
    if p:
        grad[G:G + p] = units.cov.T @ r
    grad[-1] = float(np.dot(weights, dq_s))
    return ll, grad


def _start_params(units: _Units, weights, sigma0: float) -> np.ndarray:
    """Poisson-GLM start for mu (per-group log of errors/words), gamma = 0, sigma = sigma0."""
    wu = weights[units.cluster]
    ey = np.bincount(units.group, wu * units.y, minlength=units.n_groups)
    ew = np.bincount(units.group, wu * np.exp(units.log_w), minlength=units.n_groups)
    mu = np.log(np.maximum(ey, 0.5) / ew)
    return np.concatenate([mu, np.zeros(units.cov.shape[1]), [sigma0]])


def _neg_hessian(fn, x, eps: float = 1e-5) -> np.ndarray:
    """Negative Hessian of the log-likelihood by central differences of its analytic gradient."""
    P = x.size
    H = np.empty((P, P))
    for k in range(P):
        step = eps * max(1.0, abs(x[k]))
        e = np.zeros(P)
        e[k] = step
        H[:, k] = -(fn(x + e)[1] - fn(x - e)[1]) / (2.0 * step)
    return 0.5 * (H + H.T)


def _newton_direction(H, g):
    """Solve H d = g with H made positive definite by Levenberg-Marquardt damping if needed."""
    lam = 0.0
    scale = float(np.max(np.abs(np.diag(H)))) or 1.0
    for _ in range(60):
        try:
            c = np.linalg.cholesky(H + lam * np.eye(H.shape[0]))
            return np.linalg.solve(c.T, np.linalg.solve(c, g)), lam
        except np.linalg.LinAlgError:
            lam = max(2.0 * lam, 1e-8 * scale)
    return g / scale, lam


def _optimise(units: _Units, weights, z, log_wz, x0, hessian=None, tol: float = 1e-14, maxiter: int = 200):
    """Maximise the marginal log-likelihood by damped Newton with backtracking.

    Why not scipy.optimize: with <= ~30 parameters and an analytic gradient, Newton steps on a
    finite-difference Hessian converge quadratically to a far tighter optimum than L-BFGS-B, and
    for bootstrap replicates a Hessian from the full-data fit (``hessian``) is reused as a fixed
    metric, which makes a warm-started refit ~15x cheaper (measured in benchmarks/glmm_bench.py's
    development). The Hessian is recomputed whenever a step makes too little progress.
    Convergence: Newton decrement g' H^-1 g < ``tol`` (log-likelihood units).
    Returns (x with sigma >= 0, converged, message, iterations, loglik, negative Hessian).
    """

    def fn(x):
        return _loglik_and_grad(x, units, weights, z, log_wz)

    x = np.asarray(x0, dtype=float).copy()
    ll, g = fn(x)
    if not np.isfinite(ll):
        return x, False, "log-likelihood not finite at the start values", 0, ll, hessian
    full_newton = hessian is None
    H = _neg_hessian(fn, x) if full_newton else hessian
    h_at_x = full_newton
    message = f"no convergence in {maxiter} iterations"
    converged = False
    it = 0
    for it in range(1, maxiter + 1):
        d, _ = _newton_direction(H, g)
        decrement = float(g @ d)
        if decrement < tol:
            converged, message = True, f"Newton decrement {decrement:.2g} < {tol:g}"
            break
        t = 1.0
        while t >= 1e-10:
            x_new = x + t * d
            ll_new, g_new = fn(x_new)
            if np.isfinite(ll_new) and ll_new >= ll + 1e-4 * t * decrement - 1e-12 * abs(ll):
                break
            t *= 0.5
        if t < 1e-10:
            if h_at_x:
                message = f"line search failed (Newton decrement {decrement:.2g})"
                break
            H, h_at_x = _neg_hessian(fn, x), True
            continue
        gain = ll_new - ll
        x, ll, g = x_new, ll_new, g_new
        if full_newton or ((t < 1.0 or gain < 0.25 * decrement) and decrement > 1e-8):
            H, h_at_x = _neg_hessian(fn, x), True
        else:
            h_at_x = False
    x[-1] = abs(x[-1])
    return x, bool(converged and np.all(np.isfinite(x))), message, it, float(ll), H


# --------------------------------------------------------------------------------------------
# public API


def _check_design_rank(units: _Units, cov_names) -> None:
    p = units.cov.shape[1]
    if p == 0:
        return
    X = np.column_stack([np.eye(units.n_groups)[units.group], units.cov])
    rank = np.linalg.matrix_rank(X)
    if rank < X.shape[1]:
        raise ValueError(
            f"design is rank deficient (rank {rank} < {X.shape[1]} columns): covariate(s) {list(cov_names)} "
            "are collinear with the groups or with each other"
        )


def _empty_groups_check(y, group_codes, groups) -> None:
    tot = np.bincount(group_codes, y, minlength=len(groups))
    zero = [groups[g] for g in np.flatnonzero(tot == 0)]
    if zero:
        raise ValueError(f"group(s) {zero} have zero errors in total: their log WER is -infinity (not estimable)")


def fit_poisson_glmm(errors, words, group, speaker=None, covariates=None, n_agq: int = 1,
                     start: np.ndarray | None = None, sigma0: float = 0.5) -> PoissonGLMMFit:
    """Fit the speaker random-intercept Poisson model by maximum likelihood.

    ``errors`` (n,) word errors (S + D + I) per utterance, ``words`` (n,) reference words (> 0),
    ``group`` (n,) group labels, ``speaker`` (n,) speaker ids or ``None``, ``covariates`` (n, p)
    array or DataFrame (already numeric; no intercept, groups are cell-means coded).

    ``n_agq=1`` is the Laplace approximation (glmer's default), ``n_agq>1`` adaptive Gauss-Hermite
    quadrature with that many nodes. Without ``speaker`` this is a plain Poisson GLM with offset
    log(words), fitted by statsmodels (``method='poisson_glm'``, ``sigma`` nan).
    ``start`` = (mu, gamma, sigma) warm start.
    """
    y, w = _validate_counts(errors, words)
    g_codes, groups = _codes(group, "group")
    if g_codes.size != y.size:
        raise ValueError(f"group has {g_codes.size} entries, expected {y.size}")
    cov, cov_names = _covariates(covariates, y.size)
    _empty_groups_check(y, g_codes, groups)
    per_group_obs = {groups[g]: int(n) for g, n in enumerate(np.bincount(g_codes, minlength=len(groups)))}
    if speaker is None:
        return _fit_glm(y, w, g_codes, groups, cov, cov_names, np.ones(y.size), per_group_obs, start)
    s_codes, _ = _codes(speaker, "speaker")
    if s_codes.size != y.size:
        raise ValueError(f"speaker has {s_codes.size} entries, expected {y.size}")
    units = _reduce(y, w, g_codes, len(groups), s_codes, cov)
    _check_design_rank(units, cov_names)
    z, log_wz = _gh_rule(int(n_agq))
    weights = np.ones(units.n_clusters)
    x0 = _start_params(units, weights, sigma0) if start is None else np.asarray(start, dtype=float).copy()
    x, converged, msg, nit, ll, neg_h = _optimise(units, weights, z, log_wz, x0)
    G, p = len(groups), cov.shape[1]
    spk_per_group = {groups[g]: int(np.unique(s_codes[g_codes == g]).size) for g in range(G)}
    return PoissonGLMMFit(
        groups=groups, mu=x[:G].copy(), covariate_names=cov_names, gamma=x[G:G + p].copy(),
        sigma=float(x[-1]), loglik=ll, converged=converged, message=msg,
        method=_method_name(n_agq), n_obs=int(y.size),
        n_speakers=units.n_clusters, n_speakers_per_group=spk_per_group, n_obs_per_group=per_group_obs,
        n_iter=nit, neg_hessian=neg_h,
    )


# IRLS stopping and acceptance are judged on the problem's own scale: Poisson deviance and score
# terms grow with the error counts, so an absolute tolerance (statsmodels' default criterion:
# successive deviances within ``tol``) is below float rounding for a corpus with ~1e5 errors and
# a saturated fit never "converges" although it sits on the closed form.
GLM_RTOL = 1e-10


@dataclass(frozen=True)
class _GLMResult:
    params: np.ndarray
    converged: bool
    message: str
    n_iter: int


def _glm_fit_arrays(y, w, g_codes, G, cov, freq, start, rtol: float = GLM_RTOL) -> _GLMResult:
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
        return _GLMResult(params, False, "IRLS gave non-finite estimates", n_iter)
    score = np.abs(X.T @ (uy - uw * np.exp(X @ params)))
    worst = float(score.max()) / scale
    if not res.converged:
        return _GLMResult(params, False, f"IRLS did not converge in {n_iter} iterations (deviance change "
                          f"above {rtol:g} x (1 + total errors); max |score| / (1 + total errors) = {worst:.2g})",
                          n_iter)
    if worst > math.sqrt(rtol):
        return _GLMResult(params, False, f"IRLS stopped away from the optimum (max |score| / (1 + total errors) "
                          f"= {worst:.2g} > {math.sqrt(rtol):g})", n_iter)
    return _GLMResult(params, True, f"IRLS converged in {n_iter} iterations (max |score| / (1 + total errors) "
                      f"= {worst:.2g})", n_iter)


def _fit_glm(y, w, g_codes, groups, cov, cov_names, freq, per_group_obs, start) -> PoissonGLMMFit:
    G = len(groups)
    res = _glm_fit_arrays(y, w, g_codes, G, cov, freq, None if start is None else np.asarray(start)[:-1])
    params = res.params
    # full (per-utterance) Poisson log-likelihood; collapsing rows changes only the constant
    mu_obs = w * np.exp(params[:G][g_codes] + (cov @ params[G:] if cov.shape[1] else 0.0))
    ll = float(np.sum(freq * (y * np.log(mu_obs) - mu_obs - special.gammaln(y + 1.0))))
    return PoissonGLMMFit(
        groups=groups, mu=params[:G].copy(), covariate_names=cov_names, gamma=params[G:].copy(),
        sigma=float("nan"), loglik=ll, converged=res.converged, message=res.message, method="poisson_glm",
        n_obs=int(y.size), n_speakers=0, n_speakers_per_group={}, n_obs_per_group=per_group_obs,
        n_iter=res.n_iter,
    )


def pairwise_wer_ratios(fit: PoissonGLMMFit) -> pd.DataFrame:
    """All unordered group pairs (in ``fit.groups`` order) with ratio = exp(mu_a - mu_b)."""
    rows = [{"group_a": a, "group_b": b, "ratio": fit.ratio(a, b)}
            for a, b in itertools.combinations(fit.groups, 2)]
    return pd.DataFrame(rows, columns=["group_a", "group_b", "ratio"])


def _resample_weights(cluster_group: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(B, S) integer weights: within each stratum, draw as many clusters as it has, with replacement.

    Drawn replicate by replicate (strata in sorted order), so the first k replicates of a larger
    bootstrap equal a k-replicate bootstrap with the same seed.
    """
    S = cluster_group.size
    strata = [np.flatnonzero(cluster_group == g) for g in np.unique(cluster_group)]
    out = np.zeros((n_resamples, S), dtype=np.int64)
    for b in range(n_resamples):
        for members in strata:
            out[b] += np.bincount(members[rng.integers(0, members.size, size=members.size)], minlength=S)
    return out


def _bootstrap_chunk(units, z, log_wz, x0, hessian, weight_rows):
    G = units.n_groups
    out = np.full((weight_rows.shape[0], G), np.nan)
    status = []
    for b, wts in enumerate(weight_rows):
        wts = wts.astype(float)
        ey = np.bincount(units.group, wts[units.cluster] * units.y, minlength=G)
        if np.any(ey == 0):
            status.append("a group has zero errors in the resample")
            continue
        x, converged, msg, _, _, _ = _optimise(units, wts, z, log_wz, x0.copy(), hessian=hessian)
        if not converged:
            status.append(f"not converged: {msg}")
            continue
        out[b] = x[:G]
        status.append("ok")
    return out, status


def bootstrap_wer_ratios(errors, words, group, speaker=None, covariates=None, fit: PoissonGLMMFit | None = None,
                         n_resamples: int = 1000, seed: int = 0, confidence: float = 0.95, n_agq: int = 1,
                         n_jobs: int = 1) -> RatioBootstrap:
    """Percentile CIs of exp(mu_a - mu_b) by a cluster bootstrap stratified by group.

    With ``speaker``: each replicate draws, within every group, as many speakers as the group has,
    with replacement (a speaker drawn twice counts as two speakers), and refits the model
    warm-started at the full-data estimate ``fit`` (fitted here when not given). Without
    ``speaker``: utterances are resampled within group and the Poisson GLM is refitted (such CIs
    are too narrow when a speaker's utterances are correlated). Every speaker must belong to one
    group. Replicates that cannot be fitted (a group without errors, no convergence) are dropped
    and counted in ``n_failed`` / ``failures``. Results do not depend on ``n_jobs``.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if fit is None:
        fit = fit_poisson_glmm(errors, words, group, speaker=speaker, covariates=covariates, n_agq=n_agq)
    y, w = _validate_counts(errors, words)
    g_codes, groups = _codes(group, "group")
    if groups != fit.groups:
        raise ValueError(f"fit groups {fit.groups} differ from the data's groups {groups}")
    cov, _ = _covariates(covariates, y.size)
    rng = np.random.default_rng(seed)
    G = len(groups)
    if speaker is None:
        units_per_group = np.bincount(g_codes, minlength=G)
        resampling = "utterances within group (no speaker column: CIs ignore within-speaker correlation)"
        weights = _resample_weights(g_codes, n_resamples, rng)
        reps = np.full((n_resamples, G), np.nan)
        status = []
        start = fit.params()
        for b in range(n_resamples):
            freq = weights[b].astype(float)
            ey = np.bincount(g_codes, freq * y, minlength=G)
            if np.any(ey == 0):
                status.append("a group has zero errors in the resample")
                continue
            if cov.shape[1] == 0:
                # cell-means Poisson GLM: the MLE is closed-form, log(errors / words) per group
                reps[b] = np.log(ey / np.bincount(g_codes, freq * w, minlength=G))
            else:
                res = _glm_fit_arrays(y, w, g_codes, G, cov, freq, start[:-1])
                if not res.converged:
                    status.append("not converged: IRLS")
                    continue
                reps[b] = res.params[:G]
            status.append("ok")
    else:
        resampling = "speakers within group (cluster bootstrap)"
        s_codes, spk_labels = _codes(speaker, "speaker")
        units = _reduce(y, w, g_codes, G, s_codes, cov)
        units_per_group = np.bincount(units.cluster_group[units.cluster_group >= 0], minlength=G)
        multi = np.flatnonzero(units.cluster_group < 0)
        if multi.size:
            names = [spk_labels[i] for i in multi[:10]]
            raise ValueError(f"speaker(s) {names} appear in more than one group; the speaker bootstrap "
                             "resamples speakers within a group and needs one group per speaker")
        z, log_wz = _gh_rule(int(n_agq))
        weights = _resample_weights(units.cluster_group, n_resamples, rng)
        x0 = fit.params()
        if x0[-1] <= 1e-3:
            x0[-1] = 0.05  # sigma = 0 is a stationary point; restart slightly inside
        hessian = fit.neg_hessian if fit.method == _method_name(n_agq) and x0[-1] == fit.sigma else None
        if hessian is None:
            hessian = _neg_hessian(lambda x: _loglik_and_grad(x, units, np.ones(units.n_clusters), z, log_wz), x0)
            if np.any(np.linalg.eigvalsh(hessian) <= 0):
                hessian = None  # not a usable metric: full Newton per replicate
        if n_jobs == 1:
            reps, status = _bootstrap_chunk(units, z, log_wz, x0, hessian, weights)
        else:
            from joblib import Parallel, delayed

            chunks = np.array_split(np.arange(n_resamples), max(1, int(n_jobs)) * 4)
            parts = Parallel(n_jobs=n_jobs)(delayed(_bootstrap_chunk)(units, z, log_wz, x0, hessian, weights[c])
                                            for c in chunks if c.size)
            reps = np.concatenate([p[0] for p in parts])
            status = [s for p in parts for s in p[1]]
    ok = np.array([s == "ok" for s in status])
    reps_ok = reps[ok]
    failures: dict[str, int] = {}
    for s in status:
        if s != "ok":
            failures[s] = failures.get(s, 0) + 1
    alpha = 1.0 - confidence
    rows = []
    for ia, ib in itertools.combinations(range(G), 2):
        est = float(np.exp(fit.mu[ia] - fit.mu[ib]))
        if reps_ok.shape[0] >= 2:
            d = reps_ok[:, ia] - reps_ok[:, ib]
            lo, hi = np.exp(np.quantile(d, [alpha / 2.0, 1.0 - alpha / 2.0]))
            se = float(np.std(d, ddof=1))
        else:
            lo = hi = se = float("nan")
        degenerate = bool(not (np.isfinite(lo) and np.isfinite(hi) and hi > lo)
                          or min(units_per_group[ia], units_per_group[ib]) < 2)
        rows.append({"group_a": groups[ia], "group_b": groups[ib], "ratio": est, "ci_low": float(lo),
                     "ci_high": float(hi), "significant": bool(not degenerate and (lo > 1.0 or hi < 1.0)),
                     "degenerate": degenerate, "se_log_ratio": se})
    table = pd.DataFrame(rows, columns=["group_a", "group_b", "ratio", "ci_low", "ci_high", "significant",
                                        "degenerate", "se_log_ratio"])
    return RatioBootstrap(table=table, replicates=reps_ok, n_resamples=int(n_resamples),
                          n_failed=int((~ok).sum()), failures=failures, seed=int(seed),
                          confidence=float(confidence), resampling=resampling)
