"""Propensity-score matching (the SpEAT paper's U.S./Korean matching) and covariate balance.

* :func:`propensity_scores`: P(treated | covariates) from a logistic regression (statsmodels
  ``Logit``, maximum likelihood, with an intercept) fitted on treated and control rows together.
* :func:`authors_fold_scores`: the scores the SpEAT authors' matching library computed
  (psmpy ``PsmPy.logistic_ps(balance=True)``); with :mod:`.authors_psm`'s matching they give the
  authors' 59 pairs pair by pair.
* :func:`propensity_pairs`: greedy nearest-neighbour matching on that score without
  replacement: treated rows are visited in table order; each takes the unused control whose
  score is closest, if the absolute score difference is within ``caliper`` (inclusive, on the
  probability scale). Controls at exactly the same distance are taken in a seeded random order.
* :func:`standardized_mean_differences`: (mean treated - mean control) / pooled SD of the
  *unmatched* groups, sqrt((s_t^2 + s_c^2) / 2) with ddof=1, before and after matching; the
  same denominator before and after, so the change is the change of the mean difference;
* :func:`pair_differences`: how far apart the two members of each pair are (a propensity score
  balances the groups' means, not each pair: two speakers of different sex can share a score).

Pairs are a DataFrame with columns ``treated`` and ``control`` holding index labels.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from speechbias.stimuli.selection.authors_psm import liblinear_logit_scores
from speechbias.stimuli.selection.matching import SelectionError, greedy_nearest


def propensity_scores(treated: pd.Series, covariates: pd.DataFrame, what: str) -> tuple[pd.Series, dict]:
    """Fitted P(treated = 1) per row, and the fit (coefficients on the logit scale, n, log-likelihood).

    ``treated``: booleans; ``covariates``: numeric columns on the same index (an intercept is added).
    A model that cannot be fitted (separation, constant covariate) is a :class:`SelectionError`
    naming ``what``.
    """
    # deferred: statsmodels takes ~1 s to import, and every run imports this module (the registry's
    # recipes) while only a manifest being built fits a propensity model
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationError, PerfectSeparationWarning

    y = treated.astype(float).to_numpy()
    if y.min() == y.max():
        raise SelectionError(f"{what}: propensity model needs treated and control rows, got only one group")
    design = sm.add_constant(covariates.astype(float), has_constant="add")
    constant = [c for c in covariates.columns if covariates[c].nunique() < 2]
    if constant:
        raise SelectionError(
            f"{what}: covariate(s) {constant} take a single value; drop them from the propensity model"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            fit = sm.Logit(y, design).fit(disp=0, maxiter=200)
        except (PerfectSeparationWarning, PerfectSeparationError, ConvergenceWarning, np.linalg.LinAlgError) as exc:
            raise SelectionError(
                f"{what}: the logistic propensity model cannot be fitted ({exc}); the covariates separate the groups"
            ) from exc
    score = pd.Series(fit.predict(design), index=covariates.index, name="propensity")
    model = {
        "model": "logistic regression (statsmodels Logit, maximum likelihood)",
        "coefficients": {k: float(v) for k, v in fit.params.items()},
        "n": int(len(y)),
        "n_treated": int(y.sum()),
        "log_likelihood": float(fit.llf),
    }
    return score, model


AUTHORS_FOLD_SEED = 42  # psmpy's fixed random_state for the rows its last fold draws
AUTHORS_LAST_FOLD_MIN = 20  # psmpy tops a last fold of <= 20 leftover rows up to 20 per group


def authors_fold_scores(treated: pd.Series, covariates: pd.DataFrame) -> pd.Series:
    """Propensity scores as psmpy's ``logistic_ps(balance=True)`` computes them (the SpEAT authors' code).

    The larger group, in table order, is cut into folds the size of the smaller group; each fold
    plus the whole smaller group fits an L2-penalised logistic regression (C = 1, solved as liblinear
    solves it: :func:`~speechbias.stimuli.selection.authors_psm.liblinear_logit_scores`) and scores its own
    rows. Leftover rows of the larger group form a last fold with as many rows of the smaller group
    drawn at random (``RandomState(42)``); a leftover of at most 20 is topped up to 20 with rows
    already folded, against 20 drawn rows of the smaller group. A row scored in several folds gets
    the mean of its scores. Rows of the larger group are thus scored by different models: their
    scores are not on one scale, which is why the authors' pairs are far apart in age and sex.

    Groups of equal size are refused (a :class:`SelectionError`): psmpy 0.3.13 raises ``ValueError: No
    objects to concatenate`` there, so the authors' procedure gives no pairs to replay.

    The scores come in psmpy's row order (:func:`psmpy_row_order`), the order its ``knn_matched``
    visits the smaller group and breaks ties in the larger one; ``.sort_index()`` gives table order.
    """
    is_t = treated.reindex(covariates.index).astype(bool)
    small, large = (
        (covariates[is_t], covariates[~is_t]) if is_t.sum() <= (~is_t).sum() else (covariates[~is_t], covariates[is_t])
    )
    if len(small) == len(large):  # psmpy 0.3.13 folds only a larger group: 'No objects to concatenate'
        raise SelectionError(
            f"authors_folds: both groups have {len(small)} rows; psmpy, whose matching authors_folds replays, "
            "cannot match groups of equal size (it fails with 'No objects to concatenate'); "
            "use propensity_model=logit"
        )
    small_is_t = bool(is_t.loc[small.index[0]])
    n, k = len(small), len(large) // len(small)
    rest = len(large) - k * n
    if 0 < rest <= AUTHORS_LAST_FOLD_MIN and (k * n < AUTHORS_LAST_FOLD_MIN - rest or n < AUTHORS_LAST_FOLD_MIN):
        raise SelectionError(
            f"authors_folds: {len(small)} and {len(large)} rows are too few for psmpy's last fold "
            f"of {AUTHORS_LAST_FOLD_MIN} per group; use propensity_model=logit"
        )
    rng = np.random.RandomState(AUTHORS_FOLD_SEED)
    folds = [(large.iloc[i * n : (i + 1) * n], small) for i in range(k)]
    if rest > AUTHORS_LAST_FOLD_MIN:
        folds.append((large.iloc[k * n :], small.iloc[rng.choice(n, size=rest, replace=False)]))
    elif rest > 0:
        top_up = large.iloc[: k * n].iloc[rng.choice(k * n, size=AUTHORS_LAST_FOLD_MIN - rest, replace=False)]
        drawn = small.iloc[
            np.random.RandomState(AUTHORS_FOLD_SEED).choice(n, size=AUTHORS_LAST_FOLD_MIN, replace=False)
        ]
        folds.append((pd.concat([large.iloc[k * n :], top_up]), drawn))
    scored = []
    for big_rows, small_rows in folds:
        rows = pd.concat([big_rows, small_rows])
        y = np.r_[np.full(len(big_rows), not small_is_t), np.full(len(small_rows), small_is_t)].astype(float)
        scored.append(pd.Series(liblinear_logit_scores(y, rows.to_numpy(dtype=float)), index=rows.index))
    mean = pd.concat(scored).groupby(level=0).mean()
    order = psmpy_row_order([rows.index for rows in scored])
    return mean.reindex(order).rename("propensity")


def psmpy_row_order(fold_labels: list[pd.Index]) -> pd.Index:
    """The order of psmpy's ``predicted_data`` after ``logistic_ps(balance=True)``, from each fold's row
    labels (larger group's rows first, then the smaller group's, as the folds were concatenated).

    psmpy concatenates the folds, takes the labels that occur more than once (rows scored in several
    folds) in the order they first occur, puts one averaged row of each in front, then the rows scored
    once in the order they occur. So where its last fold is topped up with rows already folded, those
    rows move to the front of the larger group; where a fold draws part of the smaller group, the drawn
    rows move to the front of the smaller group. With two or more whole folds and a last fold of more
    than 20 rows (the paper's US/Korean set) both groups keep their table order.
    """
    labels = fold_labels[0].append(list(fold_labels[1:]))
    repeated = labels.duplicated(keep=False)
    return labels[repeated].unique().append(labels[~repeated])


def propensity_pairs(score: pd.Series, treated: pd.Series, caliper: float, rng: np.random.Generator) -> pd.DataFrame:
    """Greedy 1:1 nearest-neighbour pairs on ``score`` without replacement, within ``caliper``.

    Treated rows are visited in the order of ``score``'s index; a treated row with no unused
    control within ``caliper`` stays unmatched.
    """
    if not caliper > 0:
        raise SelectionError(f"propensity caliper must be > 0, got {caliper!r}")
    is_t = treated.reindex(score.index).astype(bool).to_numpy()
    controls = score[~is_t]
    controls = controls.iloc[rng.permutation(len(controls))]  # decides exact-distance ties
    visited = score[is_t]
    near = greedy_nearest(visited.to_numpy(dtype=float), controls.to_numpy(dtype=float), caliper)
    return pd.DataFrame([(visited.index[i], controls.index[j]) for i, j in near], columns=["treated", "control"])


def standardized_mean_differences(
    treated: pd.DataFrame, control: pd.DataFrame, matched_treated: pd.DataFrame, matched_control: pd.DataFrame
) -> dict[str, dict[str, float | None]]:
    """Per covariate column: SMD before (all rows) and after (matched rows) matching; see module doc."""
    out = {}
    for col in treated.columns:
        t, c = treated[col].astype(float), control[col].astype(float)
        pooled = float(np.sqrt((t.var(ddof=1) + c.var(ddof=1)) / 2))

        def smd(a: pd.Series, b: pd.Series, pooled: float = pooled) -> float | None:
            if not len(a) or not len(b) or not pooled > 0:
                return None
            return float((a.mean() - b.mean()) / pooled)

        out[col] = {
            "before": smd(t, c),
            "after": smd(matched_treated[col].astype(float), matched_control[col].astype(float)),
            "mean_treated_before": float(t.mean()),
            "mean_control_before": float(c.mean()),
            "pooled_sd_before": pooled,
        }
    return out


def pair_differences(matched_treated: pd.DataFrame, matched_control: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Per covariate column: mean and max |treated - control| over pairs (row k with row k) and pairs equal on it."""
    out = {}
    for col in matched_treated.columns:
        gap = np.abs(matched_treated[col].to_numpy(dtype=float) - matched_control[col].to_numpy(dtype=float))
        out[col] = {
            "mean_abs": float(gap.mean()) if len(gap) else None,
            "max_abs": float(gap.max()) if len(gap) else None,
            "n_equal": int((gap == 0).sum()),
        }
    return out
