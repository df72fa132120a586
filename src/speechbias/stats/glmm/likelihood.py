"""The marginal log-likelihood of the speaker random-intercept Poisson model and its gradient.

Each speaker's 1-D integral over its intercept is approximated by the Laplace method
(``n_agq=1``) or adaptive Gauss-Hermite quadrature (``n_agq>1``), as ``lme4::glmer(..., nAGQ=n_agq)``
defines them: random effect in the spherical parametrisation ``r = sigma * u``, nodes centred at the
conditional mode of ``u`` (closed form through the Wright omega function) and scaled by the
conditional curvature. Parameters are the flat vector (mu (G,), gamma (p,), sigma); speakers may be
weighted (a bootstrap replicate's draw counts).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from speechbias.stats.glmm.design import Units


def method_name(n_agq: int) -> str:
    """The fit's ``method`` label: ``laplace`` for one node, else ``aghq(<n>)``."""
    return "laplace" if int(n_agq) == 1 else f"aghq({int(n_agq)})"


def gauss_hermite_rule(n_agq: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z_k and log weights of the n-point Gauss-Hermite rule for the N(0, 1) density."""
    if n_agq < 1:
        raise ValueError(f"n_agq must be >= 1 (1 = Laplace), got {n_agq}")
    if n_agq == 1:
        return np.zeros(1), np.zeros(1)
    z, wts = np.polynomial.hermite_e.hermegauss(n_agq)
    return z, np.log(wts / math.sqrt(2.0 * math.pi))


def speaker_log_integrals(Y, a, sigma: float, z, log_wz):
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


def loglik_and_grad(params, units: Units, weights, z, log_wz):
    """Weighted marginal log-likelihood and its gradient w.r.t. (mu, gamma, sigma)."""
    G = units.n_groups
    p = units.cov.shape[1]
    mu = params[:G]
    gamma = params[G : G + p]
    sigma = float(params[-1])
    lin = mu[units.group] + (units.cov @ gamma if p else 0.0)
    eta = units.log_w + lin
    shift = float(eta.max())
    e = np.exp(eta - shift)
    s_sum = np.bincount(units.cluster, e, minlength=units.n_clusters)
    a = np.log(s_sum) + shift
    q, dq_a, dq_s = speaker_log_integrals(units.cluster_y, a, sigma, z, log_wz)
    wu = weights[units.cluster]
    ll = float(np.dot(weights, units.cluster_const + q) + np.dot(wu, units.y * lin))
    r = wu * (units.y + dq_a[units.cluster] * e / s_sum[units.cluster])
    grad = np.empty(G + p + 1)
    grad[:G] = np.bincount(units.group, r, minlength=G)
    if p:
        grad[G : G + p] = units.cov.T @ r
    grad[-1] = float(np.dot(weights, dq_s))
    return ll, grad
