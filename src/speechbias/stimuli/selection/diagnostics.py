"""Stimulus-set diagnostics for a manifest's sidecar report (SpEAT paper, appendix G).

* clip lengths of X vs. Y: a paired t-test over matched pairs (``pair_id``), else Welch's t-test;
* attribute corpus (all rated clips the poles were drawn from): Welch's t-test of valence by
  speaker sex, and an OLS regression of valence on speaker age with a residual plot.

Results are plain dicts of floats (JSON-ready). Lengths are in seconds. scipy.stats (~0.7 CPU-s to import)
is imported by the tests that use it: the selection package is imported with the bias test registry,
by every SpEAT run, which needs no diagnostics.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.layout import audio_duration_s


def clip_durations(manifest: pd.DataFrame) -> pd.Series:
    """``duration_s`` where known, else read from each file's header (NaN if unreadable)."""
    known = pd.to_numeric(manifest.get("duration_s", pd.Series(np.nan, index=manifest.index)), errors="coerce")
    missing = known.isna() & (manifest["path"].astype(str) != "")
    known.loc[missing] = [audio_duration_s(p) for p in manifest.loc[missing, "path"]]
    return known.astype(float)


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def length_test(manifest: pd.DataFrame) -> dict:
    """Paired t-test of X vs. Y clip lengths over pairs, or Welch's t-test when clips are unpaired."""
    from scipy import stats

    dur = clip_durations(manifest)
    x, y = manifest["role"] == "X", manifest["role"] == "Y"
    out = {
        "mean_x_s": _finite(dur[x].mean()),
        "mean_y_s": _finite(dur[y].mean()),
        "n_unknown_length": int(dur[x | y].isna().sum()),
    }
    pid = manifest["pair_id"].astype(str)
    if (pid[x | y] != "").all() and (x | y).any():
        wide = pd.DataFrame({"pair": pid, "role": manifest["role"], "d": dur})[x | y]
        wide = wide.pivot_table(index="pair", columns="role", values="d", aggfunc="first").dropna()
        res = stats.ttest_rel(wide["X"], wide["Y"]) if len(wide) > 1 else None
        out.update(
            test="paired t-test (X - Y)",
            n_pairs=int(len(wide)),
            mean_difference_s=_finite((wide["X"] - wide["Y"]).mean()) if len(wide) else None,
        )
    else:
        xs, ys = dur[x].dropna(), dur[y].dropna()
        res = stats.ttest_ind(xs, ys, equal_var=False) if len(xs) > 1 and len(ys) > 1 else None
        out.update(test="Welch t-test (X vs. Y)", n_x=int(len(xs)), n_y=int(len(ys)))
    out["t"] = _finite(res.statistic) if res is not None else None
    out["p"] = _finite(res.pvalue) if res is not None else None
    return out


def valence_by_sex(pool: pd.DataFrame) -> dict:
    """Welch's t-test of valence ratings, female vs. male speakers."""
    from scipy import stats

    f = pool.loc[pool["sex"] == "female", "valence"].astype(float).dropna()
    m = pool.loc[pool["sex"] == "male", "valence"].astype(float).dropna()
    out = {
        "test": "Welch t-test (female - male)",
        "n_female": int(len(f)),
        "n_male": int(len(m)),
        "mean_female": _finite(f.mean()),
        "mean_male": _finite(m.mean()),
        "t": None,
        "p": None,
        "df": None,
    }
    if len(f) > 1 and len(m) > 1:
        res = stats.ttest_ind(f, m, equal_var=False)
        vf, vm = f.var(ddof=1) / len(f), m.var(ddof=1) / len(m)
        welch_df = (vf + vm) ** 2 / (vf**2 / (len(f) - 1) + vm**2 / (len(m) - 1)) if vf + vm > 0 else float("nan")
        out.update(t=_finite(res.statistic), p=_finite(res.pvalue), df=_finite(welch_df))
    return out


def _age_fit(pool: pd.DataFrame):
    """(clips with a known age, OLS fit of valence on age or None when ages are unknown or constant)."""
    import statsmodels.api as sm

    data = pool[["valence", "age"]].astype(float).dropna()
    if len(data) < 3 or data["age"].nunique() < 2:
        return data, None
    return data, sm.OLS(data["valence"], sm.add_constant(data["age"])).fit()


def valence_on_age(pool: pd.DataFrame) -> dict:
    """OLS ``valence ~ 1 + age`` over clips with a known age (slope, intercept, p of the slope, R²)."""
    data, fit = _age_fit(pool)
    out = {
        "model": "OLS valence ~ 1 + speaker_age",
        "n": int(len(data)),
        "slope": None,
        "intercept": None,
        "p_slope": None,
        "r2": None,
        "plot": None,
    }
    if fit is None:
        out["skipped"] = "speaker ages unknown or constant"
        return out
    out.update(
        slope=_finite(fit.params["age"]),
        intercept=_finite(fit.params["const"]),
        p_slope=_finite(fit.pvalues["age"]),
        r2=_finite(fit.rsquared),
    )
    return out


def valence_residuals_figure(pool: pd.DataFrame):
    """Residuals of :func:`valence_on_age` against fitted valence and against age (a matplotlib figure),
    or None when there is no fit. The caller saves it."""
    data, fit = _age_fit(pool)
    if fit is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    axes[0].scatter(fit.fittedvalues, fit.resid, s=8, alpha=0.6)
    axes[0].axhline(0, color="k", lw=0.8)
    axes[0].set(xlabel="fitted valence", ylabel="residual", title="residuals vs. fitted")
    axes[1].scatter(data["age"], fit.resid, s=8, alpha=0.6)
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set(xlabel="speaker age (years)", ylabel="residual", title="residuals vs. age")
    fig.tight_layout()
    return fig


def cell_counts(manifest: pd.DataFrame) -> dict:
    """Clips per role/group and per role x stratum, and distinct pairs."""
    groups = manifest.groupby(["role", "group"]).size()
    strata = manifest.groupby(["role", "stratum"]).size()
    pid = manifest["pair_id"].astype(str)
    return {
        "per_group": {f"{r}:{g}": int(n) for (r, g), n in groups.items()},
        "per_stratum": {f"{r}:{s or '-'}": int(n) for (r, s), n in strata.items()},
        "n_pairs": int(pid[pid != ""].nunique()),
    }
