"""`python evaluate.py upstream=<hub model> upstream.randomize=true` without the model's files: one line that
asks for the config only (a random control never reads the weights), as typed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_random_control_without_its_config_asks_for_the_config_not_the_weights(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", HF_HOME=str(tmp_path / "empty_hf_home"))
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), "upstream=wavlm_large", "upstream.randomize=true",
         "logger=none", f"paths.output_root={tmp_path / 'outputs'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "`hf download microsoft/wavlm-large config.json preprocessor_config.json`" in lines[0]
    assert "(not the weights)" in lines[0]
