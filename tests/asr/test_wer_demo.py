"""The offline ASR demo: ``python evaluate.py task=wer_disparity`` with no further arguments.

It composes to the shipped espeak-ng corpus and a tiny random CTC model, runs offline, and says in
the console, report.md and on every figure that the numbers are plumbing. Real usage
(``asr=whisper_small corpus=fair_speech``) still composes to the real model and corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.launch.entry import build_task, register_project_root
from speechbias.report.caveat import DEMO_CAVEAT

ROOT = Path(__file__).resolve().parents[2]
register_project_root(ROOT)  # as evaluate.py does: paths.root_dir = the repository
CONF = str(ROOT / "conf")
DEMO_ASR = ROOT / "experiments" / "demo" / "asr"


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("evaluate", overrides=overrides, return_hydra_config=True)


def test_bare_task_composes_the_demo_and_real_usage_is_unchanged():
    cfg = _compose(["task=wer_disparity"])
    assert cfg.asr._target_ == "speechbias.asr.models.tiny_random_ctc" and cfg.asr.demo
    assert cfg.corpus.name == "demo_asr" and cfg.corpus.demo
    assert Path(cfg.corpus.load.manifest) == Path(cfg.paths.demo_dir) / "asr" / "manifest.csv"
    real = _compose(["task=wer_disparity", "asr=whisper_small", "corpus=fair_speech"])
    assert real.asr.model_id == "openai/whisper-small" and "demo" not in real.asr
    assert real.corpus.name == "fair_speech" and not real.corpus.get("demo", False)
    assert (real.corpus.min_group.utterances, real.corpus.min_group.speakers) == (200, 5)
    assert _compose([]).task.name == "speat"  # the entry point's own default is untouched


def test_demo_manifest_references_are_the_synthesised_texts():
    m = pd.read_csv(DEMO_ASR / "manifest.csv", keep_default_na=False)
    texts = pd.concat(
        [
            pd.read_csv(ROOT / "experiments" / "demo" / f"{t}.csv", keep_default_na=False)
            for t in ("demo_voice", "demo_accent")
        ]
    ).drop_duplicates("path")
    assert len(m) == len(texts) == 60 and m.clip_id.is_unique
    by_path = dict(zip("../" + texts.path, texts.text))
    assert all(by_path[p] == t for p, t in zip(m.path, m.transcript))
    assert all((DEMO_ASR / p).is_file() for p in m.path)
    assert (m.voice_gender == "female").sum() == (m.voice == "en-us+f3").sum() == 10
    assert (m.accent == "british").sum() == m.voice.str.startswith("en-gb").sum() == 10
    assert sum(f.stat().st_size for f in DEMO_ASR.iterdir()) < 1_000_000


def test_demo_run_in_process_carries_the_caveat_everywhere(tmp_path, monkeypatch, caplog):
    import speechbias.report.figures as figures

    saved = []
    real_save = figures.save

    def spy(fig, path, caveat=None):
        saved.append((Path(path).name, caveat))
        return real_save(fig, path, caveat=caveat)

    monkeypatch.setattr(figures, "save", spy)
    # the demo corpus cut to its first 3 clips per voice (fast); the full one runs in the slow test below
    m = pd.read_csv(DEMO_ASR / "manifest.csv", keep_default_na=False)
    sub = m.groupby("voice", sort=False).head(3).assign(path=lambda d: [str((DEMO_ASR / p).resolve()) for p in d.path])
    sub.to_csv(tmp_path / "demo_subset.csv", index=False)
    cfg = _compose(
        [
            "task=wer_disparity",
            "logger=none",
            f"paths.output_dir={tmp_path / 'out'}",
            f"paths.cache_dir={tmp_path / 'cache'}",
            "task.progress=false",
            "task.glmm.n_resamples=50",
            "task.wer_ci_resamples=50",
            f"corpus.load.manifest={tmp_path / 'demo_subset.csv'}",
            "corpus.min_group.utterances=3",
        ]
    )
    task = build_task(cfg)  # the task object itself, as entry.run_task builds it: no Lightning import
    with caplog.at_level("WARNING"):
        summary = task.run()
    assert summary["n_transcribed"] == len(sub) and summary["n_excluded"] == 0
    assert saved and all(c == DEMO_CAVEAT for _, c in saved)
    assert DEMO_CAVEAT in caplog.text
    report = (tmp_path / "out" / "report.md").read_text()
    assert DEMO_CAVEAT in report
    levels = pd.read_csv(tmp_path / "out" / "levels.csv").set_index(["category", "group"]).utterances
    for cat in ("voice_gender", "accent", "prosody"):
        assert levels[cat].to_dict() == sub[cat].value_counts().to_dict()


@pytest.mark.slow
def test_bare_command_from_a_temporary_folder(tmp_path):
    """The literal bare command as a new user types it (only logger and output folders set)."""
    env = {k: v for k, v in os.environ.items() if k != "PROJECT_ROOT"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="offline", WANDB_SILENT="true")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "evaluate.py"),
            "task=wer_disparity",
            "logger=none",
            f"paths.output_root={tmp_path / 'outputs'}",
            f"paths.cache_dir={tmp_path / 'cache'}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert DEMO_CAVEAT in proc.stdout + proc.stderr
    reports = list((tmp_path / "outputs").rglob("report.md"))
    assert len(reports) == 1
    assert DEMO_CAVEAT in reports[0].read_text()
    assert (reports[0].parent / "wer_by_group.png").is_file() and (reports[0].parent / "results.json").is_file()
    # the Fair-Speech README states the demo's overall WER as the run prints it (it said "above 1,000%")
    import re

    readme = (ROOT / "experiments" / "fair_speech_2024" / "README.md").read_text()
    stated = re.search(r"random model's overall WER is ([\d.]+)%", readme)
    assert stated and f"overall WER: {stated.group(1)}%" in reports[0].read_text()
