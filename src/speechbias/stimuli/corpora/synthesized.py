"""A folder of synthesized voices reading the Speech Accent Archive paragraph.

Layout under ``root`` (e.g. ``<data_root>/human_synthesized``): ``<sex>_<voice>[_fast|_slow].wav``
(or .flac/.mp3), ``sex`` being ``female`` or ``male`` -- e.g. ``male_ms_sam_slow.wav`` (the SpEAT
paper used 19 SAPI4 voices at normal, fast and slow speed). Files whose name is a number (copies
of archive recordings kept in the same folder) are ignored.

Output: ``clip_id`` ("synth:<stem>"), ``path``, ``speaker`` (voice), ``corpus``, ``sex``,
``voice``, ``speed`` ("normal"/"fast"/"slow").
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora.layout import CorpusLayoutError, named_audio, record_problems, require_dir

CORPUS = "synthesized"
_NAME = re.compile(r"^(?P<sex>female|male)_(?P<voice>.+?)(?:_(?P<speed>fast|slow))?$")


def load_synthesized(root: str | Path) -> pd.DataFrame:
    """Synthesized voices; files whose name does not start with female_/male_ are reported."""
    root = require_dir(root, CORPUS)
    rows, problems = [], []
    named = (p for p in sorted(root.iterdir()) if not p.stem.isdigit())
    for p, m in named_audio(named, _NAME, "name is not <female|male>_<voice>[_fast|_slow]", problems):
        rows.append(
            {
                "clip_id": f"synth:{p.stem}",
                "path": str(p),
                "speaker": m["voice"],
                "corpus": CORPUS,
                "sex": m["sex"],
                "voice": m["voice"],
                "speed": m["speed"] or "normal",
            }
        )
    if not rows:
        raise CorpusLayoutError(CORPUS, root, "no synthesized voices named <female|male>_<voice>[_fast|_slow].wav")
    return record_problems(pd.DataFrame(rows), CORPUS, problems)
