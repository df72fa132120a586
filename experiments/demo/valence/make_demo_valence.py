"""Make the embedded demo valence set with espeak-ng (SYNTHETIC plumbing data, NOT emotional speech).

48 short clips: 4 espeak-ng voices x 12 sentences. Each sentence is spoken at one of four prosody
levels (pitch, pitch range, rate), and each level is mapped to a synthetic "valence rating" on a
0-100 scale (like MESS): level 0 (x-low pitch, narrow, slow) -> about 15 ... level 3 (x-high pitch,
wide, fast) -> about 85, plus a seeded jitter of up to +/-5. Nobody rated these clips: the ratings
only let ``python train.py`` with no overrides train and evaluate a valence head offline.

The voices differ from those of the demo bias tests (experiments/demo/make_demo_stimuli.py) so the
training set and the bias-test targets share no recordings.

Requires the Debian package espeak-ng. Writes 16 kHz mono FLAC files and ``valence.csv``
(clip_id, path, speaker, valence, prosody_level, text) into this folder.
Re-run: ``python experiments/demo/valence/make_demo_valence.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from espeak_voice import speak  # noqa: E402  (experiments/demo/espeak_voice.py)

SEED = 0

VOICES = ("en-us+f2", "en-us+m2", "en-gb+f4", "en-gb+m4")
SENTENCES = (
    "The door is open.",
    "We got a letter.",
    "It is time to eat.",
    "She found the keys.",
    "The car is outside.",
    "He made some tea.",
    "They sold the house.",
    "The phone just rang.",
    "I saw the new film.",
    "The shop is closed.",
    "We met at noon.",
    "The dog ran home.",
)
# prosody level -> (pitch, range, rate) as SSML values, and the synthetic rating it stands for
LEVELS = (
    ("x-low", "x-low", "slow"),
    ("low", "low", "medium"),
    ("high", "high", "medium"),
    ("x-high", "x-high", "fast"),
)
LEVEL_RATING = (15.0, 38.0, 62.0, 85.0)
JITTER = 5.0


def main() -> None:
    rng = np.random.default_rng(SEED)
    rows = []
    for v, voice in enumerate(VOICES):
        speaker = "espeak-" + voice
        for i, sentence in enumerate(SENTENCES):
            level = (i + v) % len(LEVELS)  # every voice speaks every level three times
            pitch, span, rate = LEVELS[level]
            body = f'<prosody pitch="{pitch}" range="{span}" rate="{rate}">{sentence}</prosody>'
            clip_id = f"v{v}_{i:02d}"
            rel = f"audio/{clip_id}.flac"
            speak(body, voice, HERE / rel, ssml=True)
            rating = LEVEL_RATING[level] + float(rng.uniform(-JITTER, JITTER))
            rows.append(
                {
                    "clip_id": clip_id,
                    "path": rel,
                    "speaker": speaker,
                    "valence": round(rating, 1),
                    "prosody_level": level,
                    "text": sentence,
                }
            )
    pd.DataFrame(rows).to_csv(HERE / "valence.csv", index=False)
    print(f"wrote valence.csv with {len(rows)} clips")


if __name__ == "__main__":
    main()
