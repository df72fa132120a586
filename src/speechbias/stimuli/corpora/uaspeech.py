"""UASpeech (Kim et al. 2008): isolated words from speakers with dysarthria and control speakers.

Layout under ``root`` (e.g. ``<data_root>/UASpeech``): ``audio/<variant>/<SPK>/<SPK>_B<block>_
<word>_M<mic>.wav`` with ``variant`` one of ``noisereduce`` (used by the SpEAT paper), ``normalized``
or ``original``. Dysarthric speakers are named F02, M05, ...; their controls CF02, CM05, ....
An optional speaker table ``doc/speaker_info.csv`` (columns ``Speaker, Age``; e.g. exported from
``doc/speaker_wordlist.xls``) adds ages.

Output (one row per recording): ``clip_id`` ("uaspeech:<file stem>"), ``path``, ``speaker``,
``corpus``, ``sex``, ``dysarthric``, ``condition``, ``speaker_number`` (shared by a dysarthric
speaker and their control, e.g. "F02"), ``block``, ``word``, ``mic``, ``age`` (NaN if unknown).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.layout import (
    CorpusLayoutError,
    numeric_column,
    read_table,
    record_problems,
    require_dir,
)

CORPUS = "UASpeech"
FILE_NAME = re.compile(
    r"^(?P<speaker>(?P<control>C?)(?P<sex>[FM])\d+)_B(?P<block>\d)_(?P<word>[A-Za-z]+\d*)_M(?P<mic>\d+)$"
)


def load_uaspeech(root: str | Path, variant: str = "noisereduce") -> pd.DataFrame:
    """All recordings of ``variant``; files whose name does not follow the corpus pattern are reported."""
    root = require_dir(root, CORPUS)
    audio = require_dir(root / "audio" / variant, CORPUS, f"expected audio/{variant}/<speaker>/*.wav")
    rows, problems = [], []
    for spk_dir in sorted(p for p in audio.iterdir() if p.is_dir()):
        for wav in sorted(spk_dir.glob("*.wav")):
            m = FILE_NAME.match(wav.stem)
            if not m or m["speaker"] != spk_dir.name:
                problems.append(f"{wav}: name does not match <speaker>_B<block>_<word>_M<mic>.wav")
                continue
            rows.append(
                {
                    "clip_id": f"uaspeech:{wav.stem}",
                    "path": str(wav),
                    "speaker": m["speaker"],
                    "corpus": CORPUS,
                    "sex": "female" if m["sex"] == "F" else "male",
                    "dysarthric": not m["control"],
                    "condition": "control" if m["control"] else "dysarthric",
                    "speaker_number": m["speaker"][1:] if m["control"] else m["speaker"],
                    "block": int(m["block"]),
                    "word": m["word"],
                    "mic": int(m["mic"]),
                }
            )
    if not rows:
        raise CorpusLayoutError(CORPUS, audio, "no recordings named <speaker>_B<block>_<word>_M<mic>.wav found")
    out = pd.DataFrame(rows)
    out["age"] = np.nan
    table = root / "doc" / "speaker_info.csv"
    if table.is_file():
        info = read_table(table, CORPUS, required=("Speaker", "Age"))
        ages = dict(zip(info["Speaker"].str.strip(), numeric_column(info, "Age", CORPUS, table)))
        out["age"] = out["speaker_number"].map(ages).astype(float)
    return record_problems(out, CORPUS, problems)
