"""Sign congruence of effect sizes: with human IAT results, and between SpEAT and downstream d.

Effect sizes come as a long table (pandas DataFrame with columns ``model``, ``test`` and a value
column) or as a mapping ``{(model, test): value}``. Two values agree when ``np.sign`` is equal
(a value of exactly 0 agrees only with 0). Test names follow the bias-test config names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pandas as pd

from speechbias.stats.validation import StatsInputError

# Human IAT effect size D per test: Table 1 of the SpEAT paper (Slaughter et al., 2023).
HUMAN_IAT_D = MappingProxyType(
    {
        "abled_disabled": 0.45,
        "european_african_american": 0.37,
        "female_male": 0.31,
        "human_synthesized": 0.33,
        "us_foreign": 0.32,
        "young_old": 0.49,
    }
)


@dataclass(frozen=True, eq=False)  # holds arrays/tables: compare fields, not objects
class SignCongruence:
    """How many (model, test) effect sizes share the sign of a reference.

    ``table`` has one row per (model, test): ``model``, ``test``, ``value``, ``reference``, ``agree``.
    """

    n_agree: int
    n_total: int
    table: pd.DataFrame
    reference: str

    @property
    def fraction(self) -> float:
        return self.n_agree / self.n_total


def _long_table(values, name: str) -> pd.DataFrame:
    """DataFrame model, test, value with unique (model, test) and finite values."""
    if isinstance(values, Mapping):
        rows = []
        for key, v in values.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise StatsInputError(f"{name}: mapping keys must be (model, test) tuples, got {key!r}")
            rows.append((str(key[0]), str(key[1]), v))
        frame = pd.DataFrame(rows, columns=["model", "test", "value"])
    elif isinstance(values, pd.DataFrame):
        missing = [c for c in ("model", "test") if c not in values.columns]
        value_cols = [c for c in values.columns if c not in ("model", "test")]
        if missing:
            raise StatsInputError(f"{name}: missing column(s) {missing}; has {list(values.columns)}")
        if "d" in value_cols:
            value_col = "d"
        elif len(value_cols) == 1:
            value_col = value_cols[0]
        else:
            raise StatsInputError(
                f"{name}: needs a column 'd' or exactly one value column besides model, test; has {value_cols}"
            )
        frame = pd.DataFrame(
            {
                "model": values["model"].astype(str),
                "test": values["test"].astype(str),
                "value": values[value_col],
            }
        ).reset_index(drop=True)
    else:
        raise StatsInputError(f"{name}: expected a DataFrame (model, test, d) or a mapping {{(model, test): d}}")
    if frame.empty:
        raise StatsInputError(f"{name}: is empty")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    bad = frame.index[~np.isfinite(frame["value"].to_numpy(dtype=float))]
    if len(bad):
        raise StatsInputError(f"{name}: non-finite value for {frame.loc[bad[:5], ['model', 'test']].values.tolist()}")
    dup = frame.duplicated(["model", "test"], keep=False)
    if dup.any():
        raise StatsInputError(
            f"{name}: duplicate (model, test) {frame.loc[dup, ['model', 'test']].values.tolist()[:5]}"
        )
    return frame


def _result(frame: pd.DataFrame, reference: str) -> SignCongruence:
    frame = frame.assign(agree=np.sign(frame["value"]) == np.sign(frame["reference"]))
    return SignCongruence(n_agree=int(frame["agree"].sum()), n_total=len(frame), table=frame, reference=reference)


def sign_congruence(effect_sizes, human=HUMAN_IAT_D) -> SignCongruence:
    """Count (model, test) effect sizes with the same sign as the human IAT D of their test."""
    frame = _long_table(effect_sizes, "effect_sizes")
    unknown = sorted(set(frame["test"]) - set(human))
    if unknown:
        raise StatsInputError(f"effect_sizes: no human IAT D for test(s) {unknown}; known: {sorted(human)}")
    human_values = np.array([human[t] for t in frame["test"]], dtype=float)
    if not np.isfinite(human_values).all():
        raise StatsInputError("human: IAT D values must be finite numbers")
    return _result(frame.assign(reference=human_values), "human IAT D")


def sign_agreement(speat_d, downstream_d) -> SignCongruence:
    """Count (model, test) pairs where SpEAT d and the downstream Cohen's d have the same sign.

    Both inputs must cover exactly the same (model, test) pairs.
    """
    left = _long_table(speat_d, "speat_d")
    right = _long_table(downstream_d, "downstream_d")
    keys_left = set(zip(left["model"], left["test"]))
    keys_right = set(zip(right["model"], right["test"]))
    if keys_left != keys_right:
        raise StatsInputError(
            f"speat_d, downstream_d: (model, test) pairs differ; only in speat_d: {sorted(keys_left - keys_right)[:5]}, "
            f"only in downstream_d: {sorted(keys_right - keys_left)[:5]}"
        )
    merged = left.merge(right.rename(columns={"value": "reference"}), on=["model", "test"], how="inner")
    return _result(merged, "downstream Cohen's d")
