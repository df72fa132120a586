"""`python train.py upstream=<a pre-trained model>` with the defaults trains on the shipped synthetic demo
data: the run says so in one line at its start, with the command that uses the paper's data, and
report.md carries the demo-data caveat. The pre-trained model here is a local checkpoint (a tiny random
transformers Wav2Vec2Model saved with save_pretrained, loaded as `upstream=hf model_id=<folder>` like any
real one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speechbias.tasks.train_ser import PAPER_TESTS, demo_data_notice, is_pretrained

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from upstream.tiny_models import tiny_config  # noqa: E402


def test_only_a_pretrained_model_counts_as_one():
    assert is_pretrained({"model_id": "facebook/hubert-xlarge-ll60k", "randomize": False})
    assert not is_pretrained({"model_id": "facebook/hubert-xlarge-ll60k", "randomize": True})  # random control
    assert not is_pretrained({"model_id": None, "randomize": True})  # tiny config-dict model
    assert not is_pretrained({"name": "fbank"})  # weight-free baseline
    line = demo_data_notice("hubert-xl", "hubert_xl", "demo", ["demo_voice", "demo_accent"])
    assert "\n" not in line and "ser_data=demo" in line and "demo_voice, demo_accent" in line
    assert f"python train.py upstream=hubert_xl ser_data=mess 'bias_tests=[{PAPER_TESTS}]'" in line
    hf = demo_data_notice("/models/my w2v2", "hf", "demo", ["demo_voice"], model_id="/models/my w2v2")
    assert "python train.py upstream=hf model_id='/models/my w2v2' ser_data=mess" in hf  # as a shell takes it


@pytest.mark.slow
def test_a_pretrained_model_on_the_demo_data_says_so_at_start_and_in_report_md(tmp_path):
    checkpoint = tmp_path / "my-wav2vec2"
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    Wav2Vec2Model(Wav2Vec2Config(**tiny_config("wav2vec2", stable=True))).save_pretrained(checkpoint)
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    run = tmp_path / "run"
    command = [sys.executable, str(REPO / "train.py"), "upstream=hf", f"model_id={checkpoint}", "max_steps=10"]
    command += ["logger=none", f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / 'cache'}"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    notices = [i for i, ln in enumerate(lines) if "will train on the synthetic demo valence set" in ln]
    forwards = [i for i, ln in enumerate(lines) if "clips needed an upstream forward" in ln]
    assert len(notices) == 1 and notices[0] < forwards[0]  # before any work
    assert f"python train.py upstream=hf model_id={checkpoint} ser_data=mess" in lines[notices[0]]
    report = (run / "report.md").read_text()
    assert "DEMO DATA:" in report and "ran on the shipped synthetic stimuli" in report
