"""Make the embedded demo stimuli with espeak-ng (synthetic plumbing data, NOT a finding).

Two demo bias tests share one attribute set:
* attributes A ("pleasant" prosody: high pitch, wide range, fast) vs. B ("unpleasant" prosody:
  low pitch, narrow range, slow), spoken by a neutral voice;
* demo_voice: targets X = espeak-ng voice en-us+f3 vs. Y = en-us+m3 (same sentences, paired);
* demo_accent: targets X = en-us vs. Y = en-gb-x-rp (same sentences, paired).

Requires the Debian package espeak-ng. Writes 16 kHz mono FLAC files and manifests into this
folder. Re-run: ``python experiments/demo/make_demo_stimuli.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from espeak_voice import speak  # this folder is on sys.path when the script runs

HERE = Path(__file__).resolve().parent

TARGET_SENTENCES = [
    "Please call Stella and ask her to bring these things with her from the store.",
    "Six spoons of fresh snow peas and five thick slabs of blue cheese.",
    "We also need a small plastic snake and a big toy frog for the kids.",
    "She can scoop these things into three red bags.",
    "We will go meet her on Wednesday at the train station.",
    "The rainbow is a division of white light into many beautiful colors.",
    "These take the shape of a long round arch, with its path high above.",
    "Its two ends apparently beyond the horizon.",
    "A boy went to the shop to buy some bread and milk.",
    "The weather today is mild with a light breeze from the west.",
]
ATTRIBUTE_SENTENCES = [
    "The meeting is on the second floor of the building.",
    "I read the newspaper every morning before work.",
    "The bus leaves at a quarter past eight.",
    "There is a table and four chairs in the kitchen.",
    "He wrote the numbers down on a sheet of paper.",
    "The library opens at nine on weekdays.",
    "We walked along the river after lunch.",
    "The package arrived on Thursday afternoon.",
    "My neighbour has a garden with tall trees.",
    "The report has twelve pages and three tables.",
]
PROSODY = {
    "A": '<prosody pitch="x-high" range="x-high" rate="fast">{}</prosody>',
    "B": '<prosody pitch="x-low" range="x-low" rate="slow">{}</prosody>',
}


def main() -> None:
    attribute_rows = []
    for role, template in PROSODY.items():
        group = "pleasant" if role == "A" else "unpleasant"
        for i, sentence in enumerate(ATTRIBUTE_SENTENCES):
            rel = f"audio/attributes/{group}_{i:02d}.flac"
            speak(template.format(sentence), "en-us", HERE / rel, ssml=True)
            attribute_rows.append(
                {
                    "clip_id": f"{group}_{i:02d}",
                    "path": rel,
                    "role": role,
                    "group": group,
                    "speaker": "espeak-en-us",
                    "pair_id": "",
                    "stratum": "",
                    "text": sentence,
                }
            )
    tests = {
        "demo_voice": {"X": ("female", "en-us+f3"), "Y": ("male", "en-us+m3")},
        "demo_accent": {"X": ("us", "en-us"), "Y": ("british", "en-gb-x-rp")},
    }
    for test, roles in tests.items():
        rows = []
        for role, (group, voice) in roles.items():
            for i, sentence in enumerate(TARGET_SENTENCES):
                rel = f"audio/{test}/{group}_{i:02d}.flac"
                speak(sentence, voice, HERE / rel)
                rows.append(
                    {
                        "clip_id": f"{group}_{i:02d}",
                        "path": rel,
                        "role": role,
                        "group": group,
                        "speaker": f"espeak-{voice}",
                        "pair_id": f"s{i:02d}",
                        "stratum": "",
                        "text": sentence,
                    }
                )
        pd.DataFrame(rows + attribute_rows).to_csv(HERE / f"{test}.csv", index=False)
        print(f"wrote {test}.csv with {len(rows) + len(attribute_rows)} clips")


if __name__ == "__main__":
    main()
