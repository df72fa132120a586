"""Reruns you can trust, typed as a user types them: a finished folder is reused only for the same config,
and two runs started at once never share a folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAST = ("speat.n_permutations=1000", "speat.per_layer=false", "logger=none")


def _env(tmp_path: Path) -> dict:
    return dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(tmp_path / "cache"))


def _evaluate(tmp_path: Path, *overrides: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), *FAST, *overrides],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _result(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())[0]


@pytest.mark.slow
def test_a_rerun_with_another_aggregation_recomputes_and_says_what_changed(tmp_path):
    run = tmp_path / "X"
    _evaluate(tmp_path, f"hydra.run.dir={run}")
    assert _result(run)["aggregation"] == "mean_sum"
    out = _evaluate(tmp_path, f"hydra.run.dir={run}", "aggregation=max_q3")
    changed = [line for line in out.splitlines() if "computed with another config" in line]
    assert len(changed) == 1, out
    assert "aggregation.layer: sum -> q3" in changed[0] and "aggregation.temporal: mean -> max" in changed[0]
    assert _result(run)["aggregation"] == "max_q3"  # not the first run's mean_sum
    again = _evaluate(tmp_path, f"hydra.run.dir={run}", "aggregation=max_q3", "logger=csv")
    assert "results already exist" in again and "computed with another config" not in again
    status = json.loads((run / "job_status.json").read_text())
    assert (status["status"], status["reused"]) == ("ok", True)  # the outcome of the run that computed them


@pytest.mark.slow
def test_two_runs_started_at_once_get_their_own_folders(tmp_path):
    outputs = tmp_path / "outputs"
    command = [sys.executable, str(REPO / "evaluate.py"), *FAST, f"paths.output_root={outputs}"]
    procs = [
        subprocess.Popen(
            command, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = sorted(p.parent for p in outputs.glob("speat/*/*/results.json"))
    assert len(runs) == 2, runs
    # each folder is named by the process that made it (<time>-<microseconds>-<pid>)
    assert sorted(r.name.rsplit("-", 1)[1] for r in runs) == sorted(str(p.pid) for p in procs)
    for run in runs:
        assert json.loads((run / "job_status.json").read_text())["status"] == "ok"
        lines = (run / "tracker_log.jsonl").read_text().splitlines()
        metrics = [json.loads(line) for line in lines if '"speat/demo_voice/d"' in line]
        assert len(metrics) == 1, lines  # one run's entries, not both
