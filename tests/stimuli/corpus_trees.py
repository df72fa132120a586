"""Generate tiny on-disk copies of each corpus's real layout (synthetic audio, realistic metadata).

Audio is a short sine tone; long interview recordings use a 1 kHz sample rate to stay small.
Every function returns what it wrote (tables or lists) so tests can derive expected results.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

SHARED_PAPER_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "speat_paper"


def write_tone(path: Path, seconds: float = 0.2, sr: int = 16000, freq: float = 220.0, fmt: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * sr)) / sr
    sf.write(str(path), (0.1 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, format=fmt)
    return path


# --- Speech Accent Archive -------------------------------------------------------------------


def saa_speakers(rng: np.random.Generator, n_us: int = 40, n_korean: int = 12, n_uk: int = 12) -> pd.DataFrame:
    """A scraped-layout speaker table: US natives, Korean natives, UK natives, others, one synthetic voice."""
    rows, sid = [], 0

    def add(language, birth_place, native, age, sex, has_mp3=True):
        nonlocal sid
        sid += 1
        count = sum(r["language"] == language for r in rows) + 1
        rows.append(
            {
                "language": language,
                "id": sid,
                "name": f"{language}{count}",
                "birth_place": birth_place,
                "native_language": native,
                "age": float(age),
                "sex": sex,
                "has_mp3": has_mp3,
                "sample_length": float(16000 * rng.uniform(18, 30)),
            }
        )

    for i in range(n_us):
        add("english", "columbus, ohio, usa", "english", 18 + (i // 2) % 30, ["female", "male"][i % 2])
    for i in range(n_korean):
        add("korean", "seoul, south korea", "korean", 20 + i % 10, ["female", "male"][i % 2])
    for i in range(n_uk):
        add("english", "leeds, uk", "english", 19 + 5 * i, ["female", "male"][i % 2])
    add("french", "paris, france", "french", 30, "female")
    add("english", "boston, massachusetts, usa", "english", 40, "male", has_mp3=False)
    add("synthesized", "", "synthesized", 0, "male")
    return pd.DataFrame(rows)


def write_saa_scraped(root: Path, speakers: pd.DataFrame, audio_by: str = "id") -> Path:
    """``speaker_list.csv`` + ``<id>.wav`` (or ``<name>.mp3``) for every speaker with has_mp3."""
    root.mkdir(parents=True, exist_ok=True)
    speakers.to_csv(root / "speaker_list.csv", index=False)
    for r in speakers[speakers["has_mp3"]].itertuples():
        if audio_by == "id":
            write_tone(root / f"{r.id}.wav", 0.1)
        else:
            write_tone(root / "audio" / f"{r.name}.mp3", 0.1, fmt="MP3")
    return root


def write_saa_kaggle(root: Path, speakers: pd.DataFrame) -> Path:
    """The Kaggle mirror: ``speakers_all.csv`` + ``recordings/recordings/<filename>.mp3``."""
    root.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(
        {
            "age": speakers["age"],
            "age_onset": 0,
            "birthplace": speakers["birth_place"],
            "filename": speakers["name"],
            "native_language": speakers["native_language"],
            "sex": speakers["sex"],
            "speakerid": speakers["id"],
            "country": speakers["birth_place"].str.split(",").str[-1].str.strip(),
            "file_missing?": ~speakers["has_mp3"],
            "Unnamed: 9": "",
        }
    )
    table.to_csv(root / "speakers_all.csv", index=False)
    for r in speakers[speakers["has_mp3"]].itertuples():
        write_tone(root / "recordings" / "recordings" / f"{r.name}.mp3", 0.1, fmt="MP3")
    return root


# --- attribute corpora -------------------------------------------------------------------------


def write_mess(
    root: Path, rng: np.random.Generator, clips_per_actor: int = 22, tie_valence: bool = False
) -> pd.DataFrame:
    """MESS-like clips ``<code>_SCR.wav`` for 6 actors and a ratings table ``Coded stimuli final.csv``."""
    rows = []
    for actor, age in zip(["F1", "F2", "F3", "M1", "M2", "M3"], [21, 35, 48, 24, 39, 55]):
        for k in range(clips_per_actor):
            code = f"{'ACHS'[k % 4]}{actor}{'MTV'[k % 3]}{k + 1:02d}"
            valence = float(np.round(rng.uniform(-4, 4), 1 if tie_valence else 3))
            rows.append(
                {
                    "code": code,
                    "Gender": actor[0],
                    "Talker": actor[1],
                    "Emotion": code[0],
                    "Cue": "V",
                    "Valence": valence,
                    "Arousal": float(rng.uniform(-4, 4)),
                    "speaker_age": age,
                }
            )
            write_tone(root / f"{code}_SCR.wav", 0.1, freq=200 + k)
    table = pd.DataFrame(rows)
    table.to_csv(root / "Coded stimuli final.csv", index=False)
    return table


def write_eu_emotion(root: Path, rng: np.random.Generator, actors: str = "ABCD", per_actor: int = 9) -> pd.DataFrame:
    """EU-Emotion-like tree: Original/ and Fixed - amplified volume/ folders, speaker_info.csv, survey CSV."""
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "ActorCode": list(actors),
            "Age": [19 + 7 * i for i in range(len(actors))],
            "Gender": ["Female", "Male"] * (len(actors) // 2) + ["Female"] * (len(actors) % 2),
            "Script": "A",
            "MeanCCR": "40%",
        }
    ).to_csv(root / "speaker_info.csv", index=False)
    rows = []
    for a in actors:
        for k in range(per_actor):
            letter = "ABCDEFGHIJKLMNOP"[k]
            emotion = ["Happy", "Sad", "Afraid"][k % 3]
            low = k % 4 == 3
            folder = emotion + (" - Low Intensity" if low else "")
            if k % 5 == 1:  # volume-fixed file: survey id ends in x
                sid, stem, top = f"{a}-V3{letter}x", f"fix__{a}V3{letter}", "Fixed - amplified volume"
            elif k % 5 == 2:  # '<id>1' is spelled '<id> 1' on disk
                sid, stem, top = f"{a}-V3{letter}1", f"{a}V3{letter} 1", "Original"
            else:
                sid, stem, top = f"{a}-V3{letter}", f"{a}V3{letter}", "Original"
            write_tone(root / top / folder / f"{stem}.mp3", 0.1, fmt="MP3")
            rows.append(
                {
                    "expressed_emotion": emotion,
                    "emotion_intensity": "Low" if low else "High",
                    "stimulus_id": sid,
                    "sentences": f"sentence {k}",
                    "semantically_neutral": "no" if k == per_actor - 1 else "yes",
                    "valence": float(np.round(rng.uniform(1, 5), 3)),
                    "stem": stem,
                }
            )
    table = pd.DataFrame(rows)
    (root / "Supplementary Information").mkdir(exist_ok=True)
    table.drop(columns="stem").to_csv(root / "Supplementary Information" / "uk_voices_survey_results.csv", index=False)
    return table


# --- dysarthric speech -------------------------------------------------------------------------

TORGO_SPEAKERS = {
    "F01": "F",
    "F03": "F",
    "M01": "M",
    "M02": "M",
    "FC01": "FC",
    "FC02": "FC",
    "MC01": "MC",
    "MC02": "MC",
}


def write_torgo(root: Path, n_phrases: int = 8) -> list[str]:
    """TORGO-like tree: <group>/<speaker>/Session1/{wav_headMic,prompts}; phrases shared by all speakers."""
    phrases = [f"the quick fox number {k} jumps" for k in range(n_phrases)]
    for spk, group in TORGO_SPEAKERS.items():
        sess = root / group / spk / "Session1"
        for k, text in enumerate(phrases + ["yes", "[say 'ah' for five seconds]"]):
            utt = f"{k + 1:04d}"
            write_tone(sess / "wav_headMic" / f"{utt}.wav", 0.1)
            (sess / "prompts").mkdir(parents=True, exist_ok=True)
            (sess / "prompts" / f"{utt}.txt").write_text(text + "\n")
        (sess / "wav_arrayMic").mkdir(exist_ok=True)
    return phrases


def write_uaspeech(root: Path, speakers=("F02", "M05"), words=("C1", "D3", "UW12", "LA", "CW7", "CW9")) -> None:
    """UASpeech-like tree: audio/noisereduce/<SPK>/<SPK>_B<b>_<word>_M<mic>.wav for speakers and controls."""
    for spk in speakers:
        for s in (spk, "C" + spk):
            for w in words:
                write_tone(root / "audio" / "noisereduce" / s / f"{s}_B1_{w}_M2.wav", 0.1)
    (root / "doc").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"Speaker": list(speakers), "Age": [28, 44]}).to_csv(root / "doc" / "speaker_info.csv", index=False)


# --- interviews ----------------------------------------------------------------------------------


def _segment_plan(lengths):
    t, plan = 1.0, []
    for length in lengths:
        plan.append((t, t + length))
        t += length + 2.0
    return plan, t + 1.0


def write_buckeye_recording(root: Path, stem: str, lengths) -> list[tuple[float, float]]:
    """``<stem>.wav`` (1 kHz) and ``<stem>.words``: speaker stretches of the given lengths between IVER turns."""
    plan, total = _segment_plan(lengths)
    write_tone(root / stem / f"{stem}.wav", total, sr=1000, freq=100)
    lines = ["signal s0101a", "type 0", "color 121", "comment", "font", "separator ;", "nfields 1", "#"]
    lines.append(f"    {plan[0][0]:.6f}  122 <SIL>; <SIL>; <SIL>; S")
    for start, end in plan:
        mid = (start + end) / 2
        lines.append(f"    {mid:.6f}  122 hello; hh ah l ow; hh ah l ow; UH")
        lines.append(f"    {end:.6f}  122 world; w er l d; w er l d; NN")
        lines.append(f"    {end + 0.5:.6f}  122 <SIL>; <SIL>; <SIL>; S")
        lines.append(f"    {end + 2.0:.6f}  122 <IVER>; <IVER>; <IVER>; null")
    (root / stem / f"{stem}.words").write_text("\n".join(lines) + "\n")
    # a word starts where the previous token ends, so each speaker stretch is exactly (start, end) of the plan
    return plan


def write_coraal_component(root: Path, comp: str, speakers: list[dict], year: int | None = 2017) -> None:
    """A CORAAL component: metadata txt, audio (1 kHz), textfiles with turns of the given lengths."""
    meta_rows = []
    for spk in speakers:
        stem, lengths = spk["file"], spk["lengths"]
        plan, total = _segment_plan(lengths)
        write_tone(root / comp / f"{comp}_audio_part01_2018.10.06" / f"{stem}.wav", total, sr=1000, freq=90)
        lines = ["Line\tSpkr\tStTime\tContent\tEnTime"]
        n = 1
        for start, end in plan:
            half = (start + end) / 2
            lines += [
                f"{n}\t{spk['spkr']}\t{start:.4f}\tI went to the store\t{half:.4f}",
                f"{n + 1}\t{spk['spkr']}\t{half:.4f}\tand (pause 0.3) came back\t{end:.4f}",
                f"{n + 2}\t{comp}_int_01\t{end:.4f}\tmhm\t{end + 1.0:.4f}",
                f"{n + 3}\t{spk['spkr']}\t{end + 1.0:.4f}\t[overlap]\t{end + 1.5:.4f}",
            ]
            n += 4
        txt_dir = root / comp / f"{comp}_textfiles_2018.10.06"
        txt_dir.mkdir(parents=True, exist_ok=True)
        (txt_dir / f"{stem}.txt").write_text("\n".join(lines) + "\n")
        row = {
            "CORAAL.File": stem,
            "CORAAL.Spkr": spk["spkr"],
            "CORAAL.Sub": comp,
            "Gender": spk["gender"],
            "Age": spk["age"],
            "Interviewer.Gender": spk["interviewer"],
            "Primary.Spkr": spk.get("primary", "yes"),
        }
        if year is not None:
            row["Year.of.Interview"] = year
        meta_rows.append(row)
    pd.DataFrame(meta_rows).to_csv(root / comp / f"{comp}_metadata_2018.10.06.txt", sep="\t", index=False)


# --- audio IATs and synthesized voices -----------------------------------------------------------


def write_mitchell(root: Path, per_cell: int = 3) -> None:
    for kind in "hs":
        for sex in "fm":
            for k in range(per_cell):
                write_tone(root / "test" / f"{kind}{sex}{k + 1}{k}.wav", 0.1)


PP_PHRASES = ["assistance first", "at 225", "probability", "I have frequ"]


def write_pantos_perkins(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "audio_stimuli_used.csv").write_text("\n".join(PP_PHRASES) + "\n")
    for k, ph in enumerate(PP_PHRASES):
        write_tone(root / f"AM_Dr{1 + k % 2}_{ph}X3n.wav", 0.1)
        write_tone(root / f"KOR_Dr{1 + k % 2}_{ph}{'e' if ph.endswith('frequ') else ''}x3n.wav", 0.1)
    write_tone(root / "AM_Dr1_unusedX3n.wav", 0.1)  # not in the study's list


RR_WORDS = {"positive": ["love", "peace"], "negative": ["fear", "hate"], "neutral": ["table", "chair", "door"]}


def write_romero_rivas(root: Path) -> None:
    (root / "IAT_Stimuli").mkdir(parents=True, exist_ok=True)
    (root / "IAT_Stimuli" / "stimuli_list.txt").write_text(
        "\n".join(f"{k}: {', '.join(v)}" for k, v in RR_WORDS.items()) + "\n"
    )
    for words in RR_WORDS.values():
        for w in words:
            for accent in ("native", "foreign"):
                write_tone(root / "IAT_Stimuli" / f"{w}_{accent}.wav", 0.1)
                write_tone(root / "IAT_Stimuli - noise" / f"{w}_{accent}_Noise.wav", 0.1)


SYNTH_VOICES = {"female": ["ms_mary", "robosoft_five"], "male": ["ms_sam", "robosoft_one", "tru_voice_adult_male_1"]}


def write_synthesized(root: Path) -> None:
    for sex, voices in SYNTH_VOICES.items():
        for v in voices:
            for speed in ("", "_fast", "_slow"):
                write_tone(root / f"{sex}_{v}{speed}.wav", 0.1)
    write_tone(root / "1409.wav", 0.1)  # a copy of an archive recording: ignored
