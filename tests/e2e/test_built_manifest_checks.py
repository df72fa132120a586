"""A corpus-built test's manifest built during the run has its clips checked as a cached one's are before
the run: repeated audio is one line of error on the first run (evaluate.py single runs, list jobs and
train.py's bias_tests), nothing is cached for a rerun to reuse, and allow_duplicate_audio=true runs it with
one warning. On d0ae760 the first run went through and reported d=0.000 (exit 0); only the second run,
whose manifest was then cached, was refused.

Also: clips that differ in their audio but not in what the upstream gives them (every target's association
equal, the effect size undefined) are one line naming the test, not a traceback.

The corpora are the fixture trees of tests/stimuli/corpus_trees.py: MESS as they write it, a clip's tone set
by its number within its actor (so six actors' clips of one number are the same audio: repeated attribute
clips), and each Speech Accent Archive clip rewritten as its own tone (targets of one audio, as the trees
write them, would leave d undefined when allowed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from tests.stimuli import corpus_trees as trees

REPO = Path(__file__).resolve().parents[2]
FAST = ("upstream=fbank", "speat.n_permutations=200", "speat.per_layer=false", "speat.se_curve=false", "logger=none")
MANIFEST = "manifests/us_foreign-ours-seed0.csv"
LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\]\[[\w.]+\]\[(INFO|DEBUG)\] - ")
ERROR_END = "(HYDRA_FULL_ERROR=1 shows the traceback)"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    """SAA (30 US-born speakers, 6 Korean-born: us_foreign's matched pairs), each clip its own tone, and MESS."""
    root = tmp_path_factory.mktemp("corpora")
    rng = np.random.default_rng(0)
    speakers = trees.saa_speakers(rng, n_us=30, n_korean=6, n_uk=4)
    saa = trees.write_saa_scraped(root / "speech_accent_archive", speakers, audio_by="id")
    trees.write_mess(root / "morgan_emotional_speech_set", rng, clips_per_actor=20)
    for i, path in enumerate(sorted(saa.glob("*.wav"))):
        trees.write_tone(path, 0.1 + 0.001 * i, freq=130.0 + 11.3 * i)
    return root


def _run(script: str, workdir: Path, *overrides: str) -> tuple[int, list[str]]:
    """``python <script> <overrides>`` from ``workdir`` with its own cache; the console lines other than
    INFO log lines and progress bars."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(workdir / "cache"))
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / script), *overrides, f"paths.output_root={workdir / 'outputs'}"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [
        ln
        for ln in (proc.stdout + proc.stderr).splitlines()
        if ln.strip() and not LOG_LINE.match(ln) and "Predicting" not in ln and "srun" not in ln
    ]
    return proc.returncode, lines


def _one_error(rc: int, lines: list[str]) -> str:
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and lines[0].endswith(ERROR_END), lines
    return lines[0]


def _repeated_rows(manifest: pd.DataFrame) -> int:
    """Rows whose decoded audio an earlier row already lists (derived here: sha256 of each clip's samples)."""
    digests = [hashlib.sha256(sf.read(p, dtype="float32")[0].tobytes()).hexdigest() for p in manifest["path"]]
    return len(digests) - len(set(digests))


def test_first_run_of_a_built_manifest_with_repeated_audio_is_one_line_and_caches_nothing(tmp_path, corpora):
    work = tmp_path / "refused"
    line = _one_error(*_run("evaluate.py", work, "bias_test=us_foreign", f"paths.data_root={corpora}", *FAST))
    assert line.startswith(f"error: bias test us_foreign, built for {work / 'cache' / MANIFEST}: ")
    assert "repeat audio listed in another row" in line and f"(A: {corpora}/morgan_emotional_speech_set/" in line
    assert "set allow_duplicate_audio=true to run anyway" in line
    assert line.endswith(f"(the manifest was not written: a rerun builds it again) {ERROR_END}")
    assert not (work / "cache" / MANIFEST).exists()  # nothing a rerun would take as built and checked
    assert not list((work / "outputs").rglob("results.json"))

    # allowed: the same build runs, with one warning naming the repeats, and is cached
    allowed = tmp_path / "allowed"
    rc, lines = _run(
        "evaluate.py",
        allowed,
        "bias_test=us_foreign",
        f"paths.data_root={corpora}",
        "allow_duplicate_audio=true",
        *FAST,
    )
    assert rc == 0, lines
    assert len(lines) == 2 and lines[1].startswith("results in "), lines  # the warning, then where the results are
    assert "[WARNING] - bias test us_foreign, built for" in lines[0] and "repeat audio" in lines[0]
    assert lines[0].endswith("(run anyway: allow_duplicate_audio=true)")
    manifest = pd.read_csv(allowed / "cache" / MANIFEST, dtype=str, keep_default_na=False)
    n_repeated = _repeated_rows(manifest)
    assert n_repeated > 0
    # the refused run counted the repeats of this very build (a build is a function of the seed)
    assert f": {n_repeated} row(s) repeat audio" in line
    (result,) = json.loads(next((allowed / "outputs").rglob("results.json")).read_text())
    assert (
        np.isfinite(result["d"])
        and result["test"] == "us_foreign"
        and result["n_x"] + result["n_y"] + result["n_a"] + result["n_b"] == len(manifest)
    )


def test_allowed_targets_of_one_audio_are_one_line_saying_d_is_undefined(tmp_path):
    """The lead's case: every SAA clip as the trees write it, one tone. Allowed, its targets all have the same
    association (up to rounding), which d0ae760 reported as d=0.000."""
    root = tmp_path / "corpora"
    rng = np.random.default_rng(0)
    speakers = trees.saa_speakers(rng, n_us=30, n_korean=6, n_uk=4)
    trees.write_saa_scraped(root / "speech_accent_archive", speakers, audio_by="id")
    trees.write_mess(root / "morgan_emotional_speech_set", rng, clips_per_actor=20)
    work = tmp_path / "work"
    rc, lines = _run(
        "evaluate.py", work, "bias_test=us_foreign", f"paths.data_root={root}", "allow_duplicate_audio=true", *FAST
    )
    assert rc == 1 and len(lines) == 2 and "repeat audio" in lines[0], lines  # the warning, then the error
    assert lines[1].startswith(
        "error: bias_test=us_foreign upstream=fbank aggregation=mean_sum: the effect size d is undefined"
    ) and lines[1].endswith(ERROR_END)


def test_a_list_job_refuses_a_built_manifest_with_repeated_audio_in_one_line(tmp_path, corpora):
    work = tmp_path / "list"
    line = _one_error(
        *_run("evaluate.py", work, "bias_test=[us_foreign,demo_voice]", f"paths.data_root={corpora}", *FAST)
    )
    assert line.startswith(f"error: bias test us_foreign, built for {work / 'cache' / MANIFEST}: ")
    assert "repeat audio listed in another row" in line
    assert not (work / "cache" / MANIFEST).exists()


def test_train_refuses_a_built_manifest_with_repeated_audio_in_one_line(tmp_path, corpora):
    work = tmp_path / "train"
    line = _one_error(
        *_run("train.py", work, "bias_tests=[us_foreign]", f"paths.data_root={corpora}", "max_steps=20", "logger=none")
    )
    assert line.startswith(f"error: bias test us_foreign, built for {work / 'cache' / MANIFEST}: ")
    assert "repeat audio listed in another row" in line
    assert not (work / "cache" / MANIFEST).exists()


def _tone(path: Path, freq: float, tail: int) -> Path:
    """A 0.225 s tone at 16 kHz (exactly 21 fbank frames: 400 samples + 20 hops of 160) followed by ``tail``
    samples of 0.05, fewer than a hop: audio that differs by its tail gives the same frames."""
    t = np.arange(400 + 160 * 20) / 16000
    samples = np.concatenate([0.1 * np.sin(2 * np.pi * freq * t), np.full(tail, 0.05)]).astype(np.float32)
    sf.write(str(path), samples, 16000, subtype="FLOAT")
    return path


def test_distinct_clips_with_equal_associations_are_one_line_naming_the_test(tmp_path):
    """A and B are the same tones, each with its own tail: every clip's audio differs (the duplicate check
    passes) but fbank gives A and B the same frames, so mean(A) - mean(B) is 0 and so is every target's
    association: d = 0 / 0."""
    folder = tmp_path / "clips"
    folder.mkdir()
    rows = []
    for role, freqs, tail in (("X", (300, 410), 0), ("Y", (520, 630), 0), ("A", (740, 850), 3), ("B", (740, 850), 7)):
        for freq in freqs:
            path = _tone(folder / f"{role}{freq}.wav", freq, tail)
            rows.append({"clip_id": path.stem, "path": path.name, "role": role})
    pd.DataFrame(rows).to_csv(folder / "same_frames.csv", index=False)
    work = tmp_path / "work"
    for attempt in ("extracted", "cached"):  # the extraction loop's callback, then the warm path
        line = _one_error(*_run("evaluate.py", work, f"bias_test.manifest={folder / 'same_frames.csv'}", *FAST))
        assert line.startswith(
            "error: bias_test=same_frames upstream=fbank aggregation=mean_sum: the effect size d is undefined: "
            "every target clip (X and Y) has the same association with A vs B"
        ), attempt
