"""Demographic levels as self-reported: one spelling per level, non-answers kept as "undisclosed".

Survey columns arrive with "Female" and "female ", blank cells, "NaN" and "Prefer not to say".
:func:`normalise_levels` folds case and whitespace (the level is shown in its most frequent
spelling) and maps every non-answer to the explicit level :data:`UNDISCLOSED`; it never recodes a
non-answer into a group. The returned spelling table (level, raw value, rows) says what was folded.
"""

from __future__ import annotations

import math

import pandas as pd

UNDISCLOSED = "undisclosed"
# compared after case folding, whitespace collapsing and stripping a trailing full stop
DEFAULT_UNDISCLOSED_VALUES = (
    "",
    "nan",
    "na",
    "n/a",
    "none",
    "null",
    "unknown",
    "not specified",
    "not provided",
    "not applicable",
    "prefer not to say",
    "prefer not to answer",
    "prefer not to disclose",
    "prefer not to state",
    "rather not say",
    "decline to answer",
    "decline to state",
    "declined",
    "no answer",
    "-",
    UNDISCLOSED,
)
SPELLING_COLUMNS = ["level", "raw_value", "rows"]


def _collapse(value) -> str:
    """Whitespace-collapsed text of a cell; NaN/None become the empty string."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return " ".join(str(value).split())


def _key(text: str) -> str:
    return text.casefold().rstrip(".").strip()


def normalise_levels(raw: pd.Series, undisclosed_values=None) -> pd.Series:
    """Canonical level of every cell of ``raw`` (same index).

    Cells whose folded text is in ``undisclosed_values`` (None: :data:`DEFAULT_UNDISCLOSED_VALUES`)
    become :data:`UNDISCLOSED`; other cells
    that agree after case folding and whitespace collapsing become one level, spelled as the most
    frequent of their spellings (ties: the first in sorted order).
    """
    non_answers = {
        _key(_collapse(v)) for v in (DEFAULT_UNDISCLOSED_VALUES if undisclosed_values is None else undisclosed_values)
    }
    collapsed = raw.map(_collapse)
    keys = collapsed.map(_key)
    undisclosed = keys.isin(non_answers)
    spelling_counts = collapsed[~undisclosed].groupby(keys[~undisclosed]).value_counts()
    canonical = {}
    for (key, spelling), _n in sorted(spelling_counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        canonical.setdefault(key, spelling)
    return keys.map(canonical).where(~undisclosed, UNDISCLOSED).astype(object)


def spelling_table(levels: pd.Series, raw: pd.Series) -> pd.DataFrame:
    """SPELLING_COLUMNS: how many rows of each raw value (shown with repr when not a string) became each level."""
    shown = raw.map(lambda v: v if isinstance(v, str) else repr(v))
    counts = pd.DataFrame({"level": levels.to_numpy(), "raw_value": shown.to_numpy()}).value_counts(sort=False)
    return (
        counts.rename("rows")
        .reset_index()
        .sort_values(["level", "raw_value"], kind="stable")
        .reset_index(drop=True)[SPELLING_COLUMNS]
    )
