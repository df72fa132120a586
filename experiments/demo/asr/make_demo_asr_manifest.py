"""Write the offline ASR demo corpus: a manifest over the shipped espeak-ng demo clips (no new audio).

Reference transcripts are the texts the clips were synthesised from (experiments/demo/demo_*.csv,
made by make_demo_stimuli.py); the "demographic" columns are the espeak-ng settings of each clip:
voice_gender (the +f3 variant = female, every other voice = male), accent (en-gb-x-rp = british,
en-us = us) and prosody (neutral, or the attribute clips' high/low SSML prosody). Synthetic voices:
a plumbing check for ``python evaluate.py task=wer_disparity``, NOT a finding about any group.
Re-run: ``python experiments/demo/asr/make_demo_asr_manifest.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent
PROSODY = {"pleasant": "high", "unpleasant": "low"}  # SSML pitch, range and rate: x-high + fast | x-low + slow


def demo_asr_manifest() -> pd.DataFrame:
    """One row per distinct demo clip: clip_id, path (relative to this folder), transcript, voice, columns."""
    clips = pd.concat([pd.read_csv(DEMO / f"{t}.csv", keep_default_na=False) for t in ("demo_voice", "demo_accent")])
    clips = clips.drop_duplicates("path").reset_index(drop=True)
    voice = clips["speaker"].str.removeprefix("espeak-")
    return pd.DataFrame(
        {
            "clip_id": clips["path"].str.removeprefix("audio/").str.removesuffix(".flac"),
            "path": "../" + clips["path"],
            "transcript": clips["text"],
            "voice": voice,
            "voice_gender": voice.map(lambda v: "female" if v.endswith("+f3") else "male"),
            "accent": voice.map(lambda v: "british" if v.startswith("en-gb") else "us"),
            "prosody": clips["group"].map(PROSODY).fillna("neutral"),
        }
    )


def main() -> None:
    df = demo_asr_manifest()
    missing = [p for p in df["path"] if not (HERE / p).is_file()]
    if missing:
        raise SystemExit(
            f"{len(missing)} demo clip(s) missing, e.g. {missing[0]}: run experiments/demo/make_demo_stimuli.py"
        )
    df.to_csv(HERE / "manifest.csv", index=False)
    print(
        f"wrote {HERE / 'manifest.csv'}: {len(df)} clips; "
        + "; ".join(f"{c}: {df[c].value_counts().to_dict()}" for c in ("voice_gender", "accent", "prosody"))
    )


if __name__ == "__main__":
    main()
