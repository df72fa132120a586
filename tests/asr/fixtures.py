"""Fair-Speech-layout fixture trees with generated audio (tones + noise), written into tmp folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

FS_COLUMNS = ["hash_name", "transcription", "age", "gender", "first_language", "socioeconomic_bkgd", "ethnicity"]
SENTENCES = [
    "hey play some jazz music",
    "call my mother please",
    "set a timer for ten minutes",
    "what is the weather today",
    "send a message to john",
    "turn off the lights",
]


def write_tone(path: Path, seconds: float, freq: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    wav = 0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.normal(size=t.size)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, wav.astype(np.float32), 16000)


def make_fair_speech_tree(
    root: Path,
    speakers_per_group: int = 2,
    utts_per_speaker: int = 2,
    with_speaker: bool = True,
    missing_audio: int = 0,
    empty_transcripts: int = 0,
    seconds: float = 1.0,
) -> pd.DataFrame:
    """Write <root>/metadata.tsv and <root>/asr_fairness_audio/*.wav; returns the metadata table.

    Groups: gender female/male crossed with first_language English/Spanish/Mandarin by speaker.
    The last ``missing_audio`` rows get no WAV, the first ``empty_transcripts`` rows an empty transcript.
    """
    rows = []
    k = 0
    langs = ["English", "Spanish", "Mandarin"]
    for g, gender in enumerate(["female", "male"]):
        for s in range(speakers_per_group * 2):
            spk = f"spk{g}{s}"
            lang = langs[s % 3]
            for u in range(utts_per_speaker):
                h = f"{k:032x}"
                rows.append(
                    {
                        "hash_name": h,
                        "transcription": SENTENCES[k % len(SENTENCES)],
                        "age": ["18 - 22", "31 - 45"][s % 2],
                        "gender": gender,
                        "first_language": lang,
                        "socioeconomic_bkgd": ["Low", "Medium"][u % 2],
                        "ethnicity": ["White", "Asian"][s % 2],
                        "speaker_id": spk,
                    }
                )
                write_tone(root / "asr_fairness_audio" / f"{h}.wav", seconds, 200 + 40 * k, seed=k)
                k += 1
    df = pd.DataFrame(rows)
    for i in range(empty_transcripts):
        df.loc[i, "transcription"] = ""
    for i in range(missing_audio):
        (root / "asr_fairness_audio" / f"{df.hash_name.iloc[-1 - i]}.wav").unlink()
    cols = FS_COLUMNS + (["speaker_id"] if with_speaker else [])
    df[cols].to_csv(root / "metadata.tsv", sep="\t", index=False)
    return df
