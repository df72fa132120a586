"""``hydra/launcher=slurm`` as typed, where nothing is submitted: ``hydra.launcher.dry_run=true`` (each job's
resources and each array's sbatch script), the line when the statistics set replaces resources the user
typed, and an unknown partition named by the key the user typed. Run on a PATH without SLURM (no sbatch,
squeue), with a stand-in ``sinfo`` where the partitions matter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SWEEP = ["-m", "upstream=fbank,mfcc", "bias_test=demo_voice", "hydra/launcher=slurm", "logger=none"]
# what a CPU node asks for in README's SLURM commands
CPU_NODE = ["hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2"]


def _evaluate(tmp_path: Path, *overrides: str, sinfo: str | None = None) -> subprocess.CompletedProcess:
    """``python evaluate.py <overrides>`` with only python (and a ``sinfo`` printing ``sinfo``) on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python").exists():
        (bin_dir / "python").symlink_to(sys.executable)
    if sinfo is not None:
        (bin_dir / "sinfo").write_text(f"#!/bin/sh\nprintf '{sinfo}'\n")
        (bin_dir / "sinfo").chmod(0o755)
    env = dict(os.environ, PATH=str(bin_dir), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    return subprocess.run(
        [sys.executable, "evaluate.py", *overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _sbatch_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("#SBATCH ")]


def test_a_dry_run_prints_each_jobs_resources_and_the_sbatch_script_and_submits_nothing(tmp_path):
    proc = _evaluate(tmp_path, *SWEEP, *CPU_NODE, "hydra.launcher.dry_run=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # fbank and mfcc are weight-free with the CPU trainer: both jobs take the statistics set of
    # conf/hydra/launcher/slurm.yaml (60 min, 2 CPUs, 8 GB, no GPU), one array of two
    assert "2 job(s) with the statistics (no model forward) resources (one array):" in out
    assert "timeout_min=60, nodes=1, tasks_per_node=1, cpus_per_task=2, mem_gb=8" in out
    assert "#0 : upstream=fbank bias_test=demo_voice" in out and "#1 : upstream=mfcc bias_test=demo_voice" in out
    sbatch = _sbatch_lines(out)
    for line in ("--array=0-1%2", "--cpus-per-task=2", "--mem=8GB", "--time=60", "--nodes=1", "--job-name=evaluate"):
        assert f"#SBATCH {line}" in sbatch, (line, sbatch)
    assert not [ln for ln in sbatch if "gpu" in ln]
    assert "--kill-on-bad-exit=1" in out and "-m submitit.core._submit" in out
    # the resources typed for the configured set do not reach these jobs: one line says so
    replaced = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "not applied" in ln]
    assert len(replaced) == 1, proc.stdout + proc.stderr
    assert "hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=2 not applied to the 2 job(s)" in replaced[0]
    assert "hydra.launcher.statistics.cpus_per_task=2 hydra.launcher.statistics.mem_gb=8" in replaced[0]
    # nothing submitted: no submitit folder, no job folder
    sweep = tmp_path / "sweep"
    assert not (sweep / ".submitit").exists() and not list(sweep.glob("*/.hydra"))


def test_a_dry_run_of_the_configured_set_prints_the_typed_resources_and_no_replacement_line(tmp_path):
    proc = _evaluate(
        tmp_path, *SWEEP, *CPU_NODE, "hydra.launcher.statistics.enabled=false", "hydra.launcher.dry_run=true"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 job(s) with the configured resources (one array): timeout_min=240, nodes=1, tasks_per_node=1, " in (
        proc.stdout
    )
    sbatch = _sbatch_lines(proc.stdout)
    for line in ("--array=0-1%2", "--cpus-per-task=1", "--mem=2GB", "--time=240", "--gpus-per-node=0"):
        assert f"#SBATCH {line}" in sbatch, (line, sbatch)
    assert "not applied" not in proc.stdout + proc.stderr


def test_an_unknown_partition_names_the_key_the_user_typed(tmp_path):
    sinfo = "debug*|2|16000|(null)|1|up\\n"
    proc = _evaluate(tmp_path, *SWEEP, "hydra.launcher.partition=gpus", "hydra.launcher.dry_run=true", sinfo=sinfo)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    # the statistics set's partition follows hydra.launcher.partition: that is the key to fix
    assert lines == ["error: hydra.launcher.partition=gpus: no such partition on this cluster (it has: debug)"], (
        proc.stderr[-2000:]
    )
    typed = _evaluate(
        tmp_path, *SWEEP, "hydra.launcher.statistics.partition=cpu", "hydra.launcher.dry_run=true", sinfo=sinfo
    )
    assert typed.returncode == 1
    assert [ln for ln in typed.stderr.splitlines() if ln.strip()] == [
        "error: hydra.launcher.statistics.partition=cpu: no such partition on this cluster (it has: debug)"
    ], typed.stderr[-2000:]
