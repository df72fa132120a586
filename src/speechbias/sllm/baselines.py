"""Reference policies scored by the same code as the models (:func:`speechbias.sllm.metrics.summarise`).

Each baseline is an expected (noise-free) answer policy written as weighted choices per instance:

- ``oracle``: the ideal model: always answers with one of the options, always a meaningful one, and
  picks stereotypical and anti-stereotypical equally often (weights 1/2, 1/2). slifs 100, slms 100, slbs 50.
- ``always_stereotypical``: picks the stereotypical continuation among the meaningful ones, always.
  slbs 100.
- ``random``: picks one of the three options uniformly (weights 1/3 each). slms 66.7, slbs 50.

What "-" means. A baseline is a reference point only for the metrics its definition speaks to; the
others are *not applicable* and reported as NaN (printed "-"), as in the paper's Table 3:
``always_stereotypical`` says nothing about following the instruction or about choosing a meaningful
continuation over the irrelevant one (it is the bias extreme, not a model), so its slifs and slms are
not applicable; ``random`` is a chance level of choosing among the options and never reads an
instruction, so its slifs is not applicable. The computation itself is not special-cased: the
policy's choices are scored by :func:`~speechbias.sllm.metrics.summarise`, then the inapplicable
metrics are blanked (``defined`` = False).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speechbias.sllm import ANTI_STEREOTYPICAL, IRRELEVANT, STEREOTYPICAL
from speechbias.sllm.metrics import summarise

#: baseline -> (choice, weight) per instance
POLICIES: dict[str, tuple[tuple[str, float], ...]] = {
    "oracle": ((STEREOTYPICAL, 0.5), (ANTI_STEREOTYPICAL, 0.5)),
    "always_stereotypical": ((STEREOTYPICAL, 1.0),),
    "random": ((STEREOTYPICAL, 1 / 3), (ANTI_STEREOTYPICAL, 1 / 3), (IRRELEVANT, 1 / 3)),
}
#: baseline -> metrics it is a reference for; the others are not applicable ("-")
DEFINES: dict[str, tuple[str, ...]] = {
    "oracle": ("slifs", "slms", "slbs", "slms_among_options"),
    "always_stereotypical": ("slbs",),
    "random": ("slms", "slbs", "slms_among_options"),
}
DISPLAY_NAMES = {"oracle": "Oracle", "always_stereotypical": "Always stereotypical", "random": "Random"}


def baseline_answers(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The policy's weighted choices for every instance (row) of ``table``: columns domain, speaker,
    group, choice, weight."""
    if baseline not in POLICIES:
        raise ValueError(f"baseline must be one of {sorted(POLICIES)}, got {baseline!r}")
    base = table[["domain", "speaker", "group"]].reset_index(drop=True)
    parts = [base.assign(choice=choice, weight=weight) for choice, weight in POLICIES[baseline]]
    return pd.concat(parts, ignore_index=True)


def baseline_summary(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """:func:`~speechbias.sllm.metrics.summarise` of the policy, with inapplicable metrics set to NaN
    and a ``defined`` column saying which are applicable."""
    out = summarise(baseline_answers(table, baseline), model=DISPLAY_NAMES[baseline])
    out["defined"] = out["metric"].isin(DEFINES[baseline])
    out.loc[~out["defined"], ["value", "speaker_mean", "speaker_sd"]] = np.nan
    return out


def all_baselines(table: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([baseline_summary(table, b) for b in POLICIES], ignore_index=True)
