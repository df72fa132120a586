"""Which levels of a demographic category are compared (gaps, WER ratios) and which are only reported.

A level is compared when it is a stated answer (not ``undisclosed``, unless asked for) and it has
at least ``min_utterances`` utterances and, when speaker ids are known, ``min_speakers``
speakers. Smaller levels stay in Table 2 with their counts and a status saying why they are not
compared: a one-utterance group has no sampling variability to estimate, so its WER can neither
set the relative gap nor enter a WER ratio.

Defaults follow Fair-Speech (Veliche et al., 2024: 26,471 utterances from 593 speakers, i.e.
~44.6 utterances per speaker): at least 5 speakers per group, and without speaker ids at least
200 utterances (~5 speakers' worth), so both rules ask for the same amount of data.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from speechbias.asr.levels import UNDISCLOSED

MIN_GROUP_UTTERANCES = 200
MIN_GROUP_SPEAKERS = 5
LEVEL_COLUMNS = ["category", "group", "utterances", "speakers", "compared", "status"]
COMPARED = "compared"


@dataclass(frozen=True)
class GroupRule:
    """Minimum size of a compared group; ``include_undisclosed`` compares 'undisclosed' like a group."""

    min_utterances: int = MIN_GROUP_UTTERANCES
    min_speakers: int = MIN_GROUP_SPEAKERS
    include_undisclosed: bool = False

    def __post_init__(self):
        if self.min_utterances < 1 or self.min_speakers < 1:
            raise ValueError(
                f"group minimums must be >= 1, got min_utterances={self.min_utterances}, "
                f"min_speakers={self.min_speakers} (set corpus.min_group)"
            )


def level_table(
    utts: pd.DataFrame, categories: list[str], speaker_column: str | None = None, rule: GroupRule = GroupRule()
) -> pd.DataFrame:
    """LEVEL_COLUMNS: every level of every category with its counts and whether it is compared.

    ``speakers`` is NaN without speaker ids. ``status`` is "compared" or the reason it is not.
    """
    rows = []
    for cat in categories:
        for grp, g in utts.groupby(cat, sort=True, dropna=False):
            n_utt = int(len(g))
            n_spk = int(g[speaker_column].nunique()) if speaker_column else None
            if str(grp) == UNDISCLOSED and not rule.include_undisclosed:
                status = "not compared: undisclosed (a non-answer, not a group)"
            elif n_utt < rule.min_utterances:
                status = f"not compared: too small ({n_utt} utterance(s) < {rule.min_utterances})"
            elif n_spk is not None and n_spk < rule.min_speakers:
                status = f"not compared: too small ({n_spk} speaker(s) < {rule.min_speakers})"
            else:
                status = COMPARED
            rows.append(
                {
                    "category": cat,
                    "group": str(grp),
                    "utterances": n_utt,
                    "speakers": float("nan") if n_spk is None else n_spk,
                    "compared": status == COMPARED,
                    "status": status,
                }
            )
    return pd.DataFrame(rows, columns=LEVEL_COLUMNS)


def compared_groups(levels: pd.DataFrame, category: str) -> list[str]:
    """The compared groups of ``category`` in ``levels`` (a :func:`level_table`)."""
    t = levels[(levels["category"] == category) & levels["compared"]]
    return t["group"].tolist()
