"""What a selection procedure returns: the chosen clips with their roles, and how they were chosen."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class Selection:
    """Chosen clips (a clip table plus ``role``, ``group``, ``pair_id``, ``stratum``) and a description.

    ``method`` says in words how the clips were chosen (matching method, constraints, sources);
    ``pool`` is the table the selection drew from, kept for diagnostics (e.g. all rated clips of
    an attribute corpus); ``notes`` lists anything the user should know (clips skipped, shortfalls);
    ``balance`` (JSON-ready) describes a propensity-score matching: model, caliper, counts and
    standardised mean differences of each covariate before and after matching.
    """

    clips: pd.DataFrame
    method: str
    pool: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    balance: dict | None = None


def label(
    df: pd.DataFrame, role: str, group: str = "", stratum: str | pd.Series = "", pair_id: str | pd.Series = ""
) -> pd.DataFrame:
    """Copy of ``df`` with the manifest's role columns set (``group`` "": named later, by the build)."""
    out = df.copy()
    out["role"] = role
    out["group"] = group
    out["stratum"] = stratum
    out["pair_id"] = pair_id
    return out


def paired(x: pd.DataFrame, y: pd.DataFrame, pairs: pd.DataFrame, prefix: str, stratum_of=None) -> pd.DataFrame:
    """X and Y rows of ``pairs`` (columns x, y of index labels) with shared ids ``<prefix>-000``, ...

    ``stratum_of`` maps an X row to its stratum label (default: no stratum). ``group`` is left "".
    """
    ids = [f"{prefix}-{k:03d}" for k in range(len(pairs))]
    xs, ys = x.loc[pairs["x"]].copy(), y.loc[pairs["y"]].copy()
    strata = [stratum_of(r) for _, r in xs.iterrows()] if stratum_of else [""] * len(xs)
    return pd.concat(
        [label(xs, "X", stratum=strata, pair_id=ids), label(ys, "Y", stratum=strata, pair_id=ids)], ignore_index=True
    )


def name_groups(clips: pd.DataFrame, groups: tuple[str, str]) -> pd.DataFrame:
    """Copy of target ``clips`` with ``group`` = ``groups[0]`` on the X rows and ``groups[1]`` on the Y rows."""
    out = clips.copy()
    out["group"] = np.where(out["role"] == "X", groups[0], groups[1])
    return out
