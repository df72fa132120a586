"""The small stimulus sets of three audio IAT studies (used as alternate SpEAT targets).

* Mitchell et al. 2011 (human vs. synthesized, female vs. male voices): ``<root>/test/`` (or
  ``<root>``) with files ``<h|s><f|m><n>.wav|mp3`` (h = human, s = synthesized; f/m = sex).
* Pantos & Perkins 2012 (US vs. Korean-accented English): files
  ``<AM|KOR>_Dr<1|2>_<phrase><x|X>3n.wav`` and the list of phrases used in the study,
  ``audio_stimuli_used.csv`` (one phrase per line, no header); only listed phrases are kept
  (a file whose phrase is a prefix or an extension of a listed one counts as that phrase).
* Romero-Rivas et al. 2021 (native British vs. Spanish-accented English): ``IAT_Stimuli/
  stimuli_list.txt`` (lines ``<type>: w1, w2, ...`` with type positive/negative/neutral),
  ``IAT_Stimuli/<word>_<native|foreign>.wav`` and ``IAT_Stimuli - noise/<word>_<native|foreign>_Noise.wav``.

Each loader returns ``clip_id``, ``path``, ``speaker``, ``corpus`` plus the set's own labels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora.layout import CorpusLayoutError, named_audio, record_problems, require_dir

MITCHELL = "mitchell_et_al"
PANTOS_PERKINS = "pantos_perkins"
ROMERO_RIVAS = "romero_rivas_et_al"
_MITCHELL_NAME = re.compile(r"^(?P<kind>[hs])(?P<sex>[fm])\w*$")
_PP_NAME = re.compile(r"^(?P<accent>AM|KOR)_Dr(?P<talker>[12])_(?P<phrase>.+?)[xX]3n$")


def load_mitchell(root: str | Path) -> pd.DataFrame:
    """Mitchell et al. clips: ``voice`` ("human"/"synthesized"), ``sex``."""
    root = require_dir(root, MITCHELL)
    folder = root / "test" if (root / "test").is_dir() else root
    rows, problems = [], []
    for p, m in named_audio(
        sorted(folder.iterdir()), _MITCHELL_NAME, "name does not start with h/s then f/m", problems
    ):
        rows.append(
            {
                "clip_id": f"mitchell:{p.stem}",
                "path": str(p),
                "speaker": p.stem,
                "corpus": MITCHELL,
                "voice": "human" if m["kind"] == "h" else "synthesized",
                "sex": "female" if m["sex"] == "f" else "male",
            }
        )
    if not rows:
        raise CorpusLayoutError(MITCHELL, folder, "no clips named <h|s><f|m>*.wav|mp3")
    return record_problems(pd.DataFrame(rows), MITCHELL, problems)


def listed_phrase(phrase: str, listed) -> str | None:
    """The listed phrase a file's phrase abbreviates or extends (file names truncate phrases
    inconsistently, e.g. ``I have frequ`` vs. ``I have freque``); None if unrelated."""
    hits = sorted((p for p in listed if phrase.startswith(p) or p.startswith(phrase)), key=len)
    return hits[0] if hits else None


def load_pantos_perkins(root: str | Path) -> pd.DataFrame:
    """Pantos & Perkins clips of the phrases used in the study: ``accent`` ("american"/"foreign"), ``phrase``."""
    root = require_dir(root, PANTOS_PERKINS)
    listing = root / "audio_stimuli_used.csv"
    if not listing.is_file():
        raise CorpusLayoutError(PANTOS_PERKINS, listing, "list of phrases used in the study does not exist")
    used = {line.strip().strip('"') for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()}
    rows, problems = [], []
    for p, m in named_audio(
        sorted(root.rglob("*")), _PP_NAME, "name does not match <AM|KOR>_Dr<n>_<phrase>X3n", problems
    ):
        phrase = listed_phrase(m["phrase"], used)
        if phrase is None:
            continue
        rows.append(
            {
                "clip_id": f"pantos_perkins:{p.stem}",
                "path": str(p),
                "speaker": f"{m['accent']}_Dr{m['talker']}",
                "corpus": PANTOS_PERKINS,
                "accent": "american" if m["accent"] == "AM" else "foreign",
                "phrase": phrase,
            }
        )
    out = pd.DataFrame(rows)
    if out.empty:
        raise CorpusLayoutError(PANTOS_PERKINS, root, f"no clips of the listed phrases {sorted(used)[:3]}")
    for accent in ("american", "foreign"):
        have = set(out.loc[out["accent"] == accent, "phrase"])
        problems += [f"{accent}: no clip of phrase {ph!r}" for ph in sorted(used - have)]
    return record_problems(out, PANTOS_PERKINS, problems)


def read_romero_rivas_words(path: Path) -> dict[str, list[str]]:
    """``stimuli_list.txt`` -> {type: [words]}."""
    if not path.is_file():
        raise CorpusLayoutError(ROMERO_RIVAS, path, "word list does not exist")
    words: dict[str, list[str]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if ": " not in line:
            raise CorpusLayoutError(ROMERO_RIVAS, path, f"line {lineno} is not '<type>: w1, w2, ...': {line!r}")
        kind, listed = line.split(": ", 1)
        words[kind.strip()] = [w.strip() for w in listed.split(",") if w.strip()]
    return words


def load_romero_rivas(root: str | Path) -> pd.DataFrame:
    """Romero-Rivas et al. clips: ``accent`` ("native"/"foreign"), ``word_type``, ``word``, ``background``."""
    root = require_dir(root, ROMERO_RIVAS)
    words = read_romero_rivas_words(root / "IAT_Stimuli" / "stimuli_list.txt")
    rows, problems = [], []
    for background, folder, suffix in (("quiet", "IAT_Stimuli", ""), ("noise", "IAT_Stimuli - noise", "_Noise")):
        for kind, listed in words.items():
            for word in listed:
                for accent in ("native", "foreign"):
                    p = root / folder / f"{word}_{accent}{suffix}.wav"
                    if not p.is_file():
                        problems.append(f"{folder}/{p.name}: missing")
                        continue
                    rows.append(
                        {
                            "clip_id": f"romero_rivas:{p.stem}",
                            "path": str(p),
                            "speaker": accent,
                            "corpus": ROMERO_RIVAS,
                            "accent": accent,
                            "word_type": kind,
                            "word": word,
                            "background": background,
                        }
                    )
    if not rows:
        raise CorpusLayoutError(ROMERO_RIVAS, root, "no clips <word>_<native|foreign>[_Noise].wav found")
    return record_problems(pd.DataFrame(rows), ROMERO_RIVAS, problems)
