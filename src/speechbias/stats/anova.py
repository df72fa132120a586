"""Two-way ANOVA of SpEAT effect sizes on social-group test and model family.

Fits the linear model d ~ C(test) + C(family) (+ C(test):C(family) when ``interaction``) by OLS
(statsmodels) and returns both the sequential (type I; test entered first) and the type II sums
of squares tables from ``statsmodels.stats.anova.anova_lm``. Values are cast to float64 first
(statsmodels' design matrices are float64 too: a float32 d column gave bit-identical tables).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from speechbias.stats.validation import StatsInputError


@dataclass(frozen=True, eq=False)  # holds arrays/tables: compare fields, not objects
class AnovaResult:
    """ANOVA tables (rows: test, family, [test:family], Residual; columns: df, sum_sq, F, PR(>F)
    and, for type I, mean_sq) and what produced them."""

    type1: pd.DataFrame
    type2: pd.DataFrame
    formula: str
    n_obs: int
    n_tests: int
    n_families: int
    interaction: bool
    df_resid: int = 0  # residual degrees of freedom: n_obs - rank of the design


def two_way_anova(
    table: pd.DataFrame,
    value: str = "d",
    test: str = "test",
    family: str = "family",
    interaction: bool = False,
) -> AnovaResult:
    """ANOVA of ``table[value]`` on ``table[test]`` x ``table[family]`` (one row per model x test).

    With ``interaction`` the design needs replication (several models per family and test).
    """
    if not isinstance(table, pd.DataFrame):
        raise StatsInputError(f"table: expected a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in (value, test, family) if c not in table.columns]
    if missing:
        raise StatsInputError(f"table: missing column(s) {missing}; has {list(table.columns)}")
    data = pd.DataFrame(
        {
            "value": pd.to_numeric(table[value], errors="coerce").astype(np.float64),  # to_numeric keeps float32 as is
            "test": table[test].astype(str),
            "family": table[family].astype(str),
        }
    )
    bad = data.index[~np.isfinite(data["value"].to_numpy(dtype=float))]
    if len(bad):
        raise StatsInputError(f"table: column {value!r} is not a finite number in row(s) {list(bad[:5])}")
    for column, name in ((test, "test"), (family, "family")):
        levels = data[name].nunique()
        if levels < 2:
            raise StatsInputError(f"table: column {column!r} needs at least 2 levels, has {levels}")
    n_tests, n_families = data["test"].nunique(), data["family"].nunique()
    n_params = n_tests + n_families - 1 + ((n_tests - 1) * (n_families - 1) if interaction else 0)
    if len(data) <= n_params:
        raise StatsInputError(
            f"table: {len(data)} rows leave no residual degrees of freedom for {n_params} model parameters"
            + ("; the interaction needs several models per family" if interaction else "")
        )
    # Imported here: statsmodels' formula API takes seconds to import and most callers of
    # speechbias.stats never fit an ANOVA.
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    formula = "value ~ C(test) + C(family)" + (" + C(test):C(family)" if interaction else "")
    fit = smf.ols(formula, data=data).fit()
    names = {"C(test)": "test", "C(family)": "family", "C(test):C(family)": "test:family"}
    type1 = anova_lm(fit, typ=1).rename(index=names)
    type2 = anova_lm(fit, typ=2).rename(index=names)
    return AnovaResult(
        type1=type1,
        type2=type2,
        formula=formula.replace("value", value),
        n_obs=len(data),
        n_tests=n_tests,
        n_families=n_families,
        interaction=interaction,
        df_resid=int(round(fit.df_resid)),
    )
