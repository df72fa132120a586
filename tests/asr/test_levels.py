"""normalise_levels: case/whitespace folding, the most frequent spelling wins, non-answers stay undisclosed."""

from __future__ import annotations

import math

import pandas as pd

from speechbias.asr.levels import UNDISCLOSED, normalise_levels, spelling_table


def test_folding_and_spelling():
    raw = pd.Series(
        [
            "Female",
            "female",
            " female",
            "female ",
            "Male",
            "MALE",
            "Non-binary",
            "non  binary",
            "Prefer not to say",
            "prefer not to say.",
            "",
            "NaN",
            None,
            math.nan,
            "N/A",
        ]
    )
    lv = normalise_levels(raw)
    # "female" spelled 3x (two with spaces collapse to it) vs "Female" 1x; Male/MALE tie -> sorted first ("MALE")
    assert list(lv[:6]) == ["female"] * 4 + ["MALE"] * 2
    assert list(lv[6:8]) == ["Non-binary", "non binary"]  # a hyphen is not whitespace: two levels
    assert (lv[8:] == UNDISCLOSED).all()
    sp = spelling_table(lv, raw)
    assert sp.rows.sum() == len(raw)
    assert sp[sp.level == UNDISCLOSED].rows.sum() == 7
    # None and NaN cells both show as repr(nan) (pandas stores a missing object cell as NaN)
    assert set(sp[sp.level == UNDISCLOSED].raw_value) == {
        "Prefer not to say",
        "prefer not to say.",
        "",
        "NaN",
        "nan",
        "N/A",
    }


def test_custom_non_answers():
    lv = normalise_levels(pd.Series(["x", "Refused", ""]), undisclosed_values=["refused"])
    assert list(lv) == ["x", UNDISCLOSED, ""]
