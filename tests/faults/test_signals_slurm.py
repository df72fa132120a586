"""``scancel`` of a running SLURM job (SIGTERM to its processes) on the real cluster: the job records its stop
itself, and the sweep's table shows SLURM's reason with the job's own line (``cancelled ...; the job said:
stopped by SIGTERM during training``). Slow; skipped where sbatch does not answer. (A requeued job still
resumes: tests/slurm/test_cluster_requeue.py, both by ``scontrol requeue`` and by the time-limit USR2.)"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time

import pytest

from slurm.cluster import CPU_JOB, cancel_jobs, job_ids, queue_state, sbatch_answers, start, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("not sbatch_answers()", reason="no SLURM cluster answers here (.ci/slurm/start)"),
]


def test_scancel_of_a_training_job_reads_stopped_by_sigterm_in_the_sweep_table(tmp_path):
    assert sbatch_answers()
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    proc = start(
        "train.py",
        "-m",
        "upstream=fbank",
        "max_steps=200000",
        "checkpoint_every_n_epochs=1",
        "logger=none",
        *CPU_JOB,
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
        log=log,
    )
    try:
        (job,) = wait_for(lambda: job_ids(sweep), 60, "the job's submission")
        wait_for(lambda: list(sweep.glob("*/checkpoints/last.ckpt")), 240, "the first epoch's checkpoint")
        subprocess.run(["scancel", job], check=True)
        cancelled = time.monotonic()
        assert proc.wait(timeout=120) == 1, log.read_text()[-3000:]  # a failed job: the sweep exits 1
        wait_for(lambda: queue_state(job) in ("CANCELLED", ""), 60, "the job to be cancelled")
    finally:
        proc.kill()
        cancel_jobs(sweep)
    (status_file,) = sweep.glob("*/job_status.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "failed" and status["signal"] == "SIGTERM", status
    assert status["seconds"] > 0 and time.monotonic() - cancelled < 120
    with open(sweep / "sweep_status.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "failed"
    assert "cancelled" in row["error"] and "stopped by SIGTERM during training" in row["error"], row


def test_sigterm_to_a_slurm_sweep_cancels_its_jobs_and_prints_their_table(tmp_path):
    # before (issue 40): the sweep's process printed "of 0 job(s)" and an empty sweep_status.csv and left its
    # jobs running
    assert sbatch_answers()
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    proc = start(
        "train.py",
        "-m",
        "upstream=fbank",
        "max_steps=200000",
        "checkpoint_every_n_epochs=1",
        "logger=none",
        "seed=0,1",
        *CPU_JOB,
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
        log=log,
    )
    try:
        jobs = wait_for(lambda: len(job_ids(sweep)) == 2 and job_ids(sweep), 60, "the jobs' submission")
        wait_for(lambda: len(list(sweep.glob("*/checkpoints/last.ckpt"))) == 2, 300, "both jobs training")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, log.read_text()[-3000:]
        assert all(queue_state(job) in ("CANCELLED", "") for job in jobs), [queue_state(job) for job in jobs]
    finally:
        proc.kill()
        cancel_jobs(sweep)
    console = log.read_text()
    assert "2 failed of 2 job(s)" in console, console[-3000:]
    assert console.rstrip().endswith("speechbias: sweep stopped by SIGTERM; rerun the same command to resume")
    with open(sweep / "sweep_status.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["error"].split(";")[0] for row in rows) == [
        f"SLURM job {job} cancelled by the sweep's SIGTERM" for job in jobs
    ]
    assert all(row["error"].endswith("the job said: stopped by SIGTERM during training") for row in rows), rows
