"""Percentile CIs of pairwise WER ratios by a bootstrap stratified by group.

Two resamplings: speakers within group (the cluster bootstrap, when a speaker column is given) or
utterances within group (without one). A speaker drawn k times counts as k speakers, which is the
same likelihood as weighting that speaker's marginal log-likelihood by k (speakers are independent
given the parameters), so speaker replicates are fitted as speaker-weighted likelihoods without
copying data.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from speechbias.stats.glmm.design import covariate_matrix, label_codes, reduce_to_units, validate_counts
from speechbias.stats.glmm.fit import fit_poisson_glmm
from speechbias.stats.glmm.likelihood import gauss_hermite_rule, loglik_and_grad, method_name
from speechbias.stats.glmm.newton import maximise_loglik, neg_hessian
from speechbias.stats.glmm.poisson_glm import fit_glm_arrays
from speechbias.stats.glmm.results import PoissonGLMMFit, RatioBootstrap


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


UTTERANCE_RESAMPLING = "utterances within group (no speaker column: CIs ignore within-speaker correlation)"
SPEAKER_RESAMPLING = "speakers within group (cluster bootstrap)"


def _speaker_chunk(units, z, log_wz, x0, hessian, weight_rows):
    """Refit each row of speaker weights (k, S); returns (k, G) replicate mu (nan if failed) and statuses."""
    G = units.n_groups
    out = np.full((weight_rows.shape[0], G), np.nan)
    status = []
    for b, wts in enumerate(weight_rows):
        wts = wts.astype(float)
        ey = np.bincount(units.group, wts[units.cluster] * units.y, minlength=G)
        if np.any(ey == 0):
            status.append("a group has zero errors in the resample")
            continue
        x, converged, msg, _, _, _ = maximise_loglik(units, wts, z, log_wz, x0.copy(), hessian=hessian)
        if not converged:
            status.append(f"not converged: {msg}")
            continue
        out[b] = x[:G]
        status.append("ok")
    return out, status


def _speaker_replicates(y, w, g_codes, G, cov, speaker, fit, n_resamples, rng, n_agq, n_jobs):
    """Cluster bootstrap: (B, G) replicate mu, B statuses, and the number of speakers per group."""
    s_codes, spk_labels = label_codes(speaker, "speaker")
    units = reduce_to_units(y, w, g_codes, G, s_codes, cov)
    units_per_group = np.bincount(units.cluster_group[units.cluster_group >= 0], minlength=G)
    multi = np.flatnonzero(units.cluster_group < 0)
    if multi.size:
        names = [spk_labels[i] for i in multi[:10]]
        raise ValueError(
            f"speaker(s) {names} appear in more than one group; the speaker bootstrap "
            "resamples speakers within a group and needs one group per speaker"
        )
    z, log_wz = gauss_hermite_rule(int(n_agq))
    weights = _resample_weights(units.cluster_group, n_resamples, rng)
    x0 = fit.params()
    if x0[-1] <= 1e-3:
        x0[-1] = 0.05  # sigma = 0 is a stationary point; restart slightly inside
    hessian = fit.neg_hessian if fit.method == method_name(n_agq) and x0[-1] == fit.sigma else None
    if hessian is None:
        hessian = neg_hessian(lambda x: loglik_and_grad(x, units, np.ones(units.n_clusters), z, log_wz), x0)
        if np.any(np.linalg.eigvalsh(hessian) <= 0):
            hessian = None  # not a usable metric: full Newton per replicate
    if n_jobs == 1:
        reps, status = _speaker_chunk(units, z, log_wz, x0, hessian, weights)
    else:
        from joblib import Parallel, delayed

        chunks = np.array_split(np.arange(n_resamples), max(1, int(n_jobs)) * 4)
        parts = Parallel(n_jobs=n_jobs)(
            delayed(_speaker_chunk)(units, z, log_wz, x0, hessian, weights[c]) for c in chunks if c.size
        )
        reps = np.concatenate([p[0] for p in parts])
        status = [s for p in parts for s in p[1]]
    return reps, status, units_per_group


def _utterance_replicates(y, w, g_codes, G, cov, fit, n_resamples, rng):
    """Utterance bootstrap of the Poisson GLM: (B, G) replicate mu, B statuses, utterances per group."""
    units_per_group = np.bincount(g_codes, minlength=G)
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
            res = fit_glm_arrays(y, w, g_codes, G, cov, freq, start[:-1])
            if not res.converged:
                status.append("not converged: IRLS")
                continue
            reps[b] = res.params[:G]
        status.append("ok")
    return reps, status, units_per_group


def _percentile_table(fit, groups, reps_ok, units_per_group, confidence) -> pd.DataFrame:
    """One row per group pair: full-data ratio, percentile CI of exp(mu_a - mu_b), flags, SE of the log ratio."""
    alpha = 1.0 - confidence
    rows = []
    for ia, ib in itertools.combinations(range(len(groups)), 2):
        est = float(np.exp(fit.mu[ia] - fit.mu[ib]))
        if reps_ok.shape[0] >= 2:
            d = reps_ok[:, ia] - reps_ok[:, ib]
            lo, hi = np.exp(np.quantile(d, [alpha / 2.0, 1.0 - alpha / 2.0]))
            se = float(np.std(d, ddof=1))
        else:
            lo = hi = se = float("nan")
        degenerate = bool(
            not (np.isfinite(lo) and np.isfinite(hi) and hi > lo) or min(units_per_group[ia], units_per_group[ib]) < 2
        )
        rows.append(
            {
                "group_a": groups[ia],
                "group_b": groups[ib],
                "ratio": est,
                "ci_low": float(lo),
                "ci_high": float(hi),
                "significant": bool(not degenerate and (lo > 1.0 or hi < 1.0)),
                "degenerate": degenerate,
                "se_log_ratio": se,
            }
        )
    return pd.DataFrame(
        rows, columns=["group_a", "group_b", "ratio", "ci_low", "ci_high", "significant", "degenerate", "se_log_ratio"]
    )


def bootstrap_wer_ratios(
    errors,
    words,
    group,
    speaker=None,
    covariates=None,
    fit: PoissonGLMMFit | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    n_agq: int = 1,
    n_jobs: int = 1,
) -> RatioBootstrap:
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
    y, w = validate_counts(errors, words)
    g_codes, groups = label_codes(group, "group")
    if groups != fit.groups:
        raise ValueError(f"fit groups {fit.groups} differ from the data's groups {groups}")
    cov, _ = covariate_matrix(covariates, y.size)
    rng = np.random.default_rng(seed)
    G = len(groups)
    if speaker is None:
        resampling = UTTERANCE_RESAMPLING
        reps, status, units_per_group = _utterance_replicates(y, w, g_codes, G, cov, fit, n_resamples, rng)
    else:
        resampling = SPEAKER_RESAMPLING
        reps, status, units_per_group = _speaker_replicates(
            y, w, g_codes, G, cov, speaker, fit, n_resamples, rng, n_agq, n_jobs
        )
    ok = np.array([s == "ok" for s in status])
    reps_ok = reps[ok]
    failures: dict[str, int] = {}
    for s in status:
        if s != "ok":
            failures[s] = failures.get(s, 0) + 1
    table = _percentile_table(fit, groups, reps_ok, units_per_group, confidence)
    return RatioBootstrap(
        table=table,
        replicates=reps_ok,
        n_resamples=int(n_resamples),
        n_failed=int((~ok).sum()),
        failures=failures,
        seed=int(seed),
        confidence=float(confidence),
        resampling=resampling,
    )
