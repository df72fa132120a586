"""TORGO database of dysarthric articulation (Rudzicz, Namasivayam & Wolff 2012).

Layout under ``root`` (e.g. ``<data_root>/TORGO``): speaker folders F01, F03, F04, M01-M05
(dysarthric) and FC01-FC03, MC01-MC04 (control), either directly under ``root`` or one level
down (the distribution's ``F/``, ``FC/``, ``M/``, ``MC/``). Each speaker has ``Session*/`` with
``wav_headMic/<utt>.wav`` and ``prompts/<utt>.txt``.

Output (one row per head-microphone recording with a prompt): ``clip_id``
("torgo:<speaker>/<session>/<utt>"), ``path``, ``speaker``, ``corpus``, ``sex``, ``dysarthric``
(bool), ``condition`` ("dysarthric"/"control"), ``session``, ``utterance``, ``text`` and
``num_words`` (words read aloud: bracketed directions such as "[relax your mouth]" removed).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora.layout import CorpusLayoutError, record_problems, require_dir

CORPUS = "TORGO"
SPEAKER_DIR = re.compile(r"^(?P<sex>[FM])(?P<control>C?)\d{2}$")
_DIRECTION = re.compile(r"\[[^\]]*(\]|$)")


def count_spoken_words(prompt: str) -> int:
    """Words in ``prompt`` once bracketed reading directions are removed."""
    return len(_DIRECTION.sub("", prompt).split())


def speaker_dirs(root: Path) -> list[Path]:
    """Speaker folders (F01, MC02, ...) directly under ``root`` or one level below."""
    found = [p for p in root.iterdir() if p.is_dir() and SPEAKER_DIR.match(p.name)]
    for sub in root.iterdir():
        if sub.is_dir() and not SPEAKER_DIR.match(sub.name):
            found += [p for p in sub.iterdir() if p.is_dir() and SPEAKER_DIR.match(p.name)]
    return sorted(found, key=lambda p: p.name)


def load_torgo(root: str | Path) -> pd.DataFrame:
    """All head-microphone recordings that have a prompt; recordings without one are reported."""
    root = require_dir(root, CORPUS, "unpack F.tar.bz2, FC.tar.bz2, M.tar.bz2, MC.tar.bz2 here")
    speakers = speaker_dirs(root)
    if not speakers:
        raise CorpusLayoutError(
            CORPUS, root, "no speaker folders (F01, FC01, M01, MC01, ...) found here or one level below"
        )
    rows, problems = [], []
    for spk_dir in speakers:
        m = SPEAKER_DIR.match(spk_dir.name)
        sessions = sorted(p for p in spk_dir.iterdir() if p.is_dir() and p.name.startswith("Session"))
        if not sessions:
            problems.append(f"{spk_dir}: no Session* folders")
        for session in sessions:
            wav_dir = session / "wav_headMic"
            if not wav_dir.is_dir():
                problems.append(f"{session}: no wav_headMic folder")
                continue
            prompt_dir = session / "prompts"
            for wav in sorted(wav_dir.glob("*.wav")):
                prompt = prompt_dir / f"{wav.stem}.txt"
                if not prompt.is_file():
                    problems.append(f"{wav}: no prompt {prompt.relative_to(root)}")
                    continue
                text = prompt.read_text(encoding="utf-8", errors="replace").strip()
                rows.append(
                    {
                        "clip_id": f"torgo:{spk_dir.name}/{session.name}/{wav.stem}",
                        "path": str(wav),
                        "speaker": spk_dir.name,
                        "corpus": CORPUS,
                        "sex": "female" if m["sex"] == "F" else "male",
                        "dysarthric": not m["control"],
                        "condition": "control" if m["control"] else "dysarthric",
                        "session": session.name,
                        "utterance": wav.stem,
                        "text": text,
                        "num_words": count_spoken_words(text),
                    }
                )
    if not rows:
        raise CorpusLayoutError(
            CORPUS, root, f"no head-microphone recordings with prompts found (first problems: {problems[:3]})"
        )
    return record_problems(pd.DataFrame(rows), CORPUS, problems)
