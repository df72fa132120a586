"""A SLURM job requeued mid-training (``scontrol requeue``, as pre-emption does; submitit's handler
does the same on the USR2 that SLURM sends before the time limit) resumes from its checkpoint and the
feature cache and finishes with the results of an uninterrupted run. Slow; skipped where sbatch does
not answer."""

from __future__ import annotations

import subprocess
import time

import pandas as pd
import pytest

from slurm.cluster import CPU_JOB, job_ids, needs_cluster, queue_state, start, wait_for
from slurm.conftest import TRAIN_STEPS

pytestmark = [pytest.mark.slow, needs_cluster]


# how the job is interrupted: SLURM requeues it (pre-emption, an administrator), or it gets the USR2
# that SLURM sends signal_delay_s before its time limit, on which submitit checkpoints the launcher's
# call and requeues the job itself (as at a real time limit; a time limit cannot be hit precisely here)
INTERRUPTIONS = {
    "scontrol_requeue": lambda job: ["scontrol", "requeue", job],
    "usr2_time_limit": lambda job: ["scancel", "--signal=USR2", job],
}


@pytest.mark.parametrize("interruption", list(INTERRUPTIONS))
def test_a_job_requeued_mid_training_resumes_and_ends_as_if_uninterrupted(tmp_path, one_process_train, interruption):
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    started = time.monotonic()
    proc = start(
        "train.py",
        "-m",
        "upstream=fbank",
        f"max_steps={TRAIN_STEPS}",
        "logger=none",
        *CPU_JOB,
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
        log=log,
    )
    try:
        (job,) = wait_for(lambda: job_ids(sweep), 60, "the job's submission")
        wait_for(lambda: list(sweep.glob("*/checkpoints/last.ckpt")), 180, "the first epoch's checkpoint")
        time.sleep(1)
        subprocess.run(INTERRUPTIONS[interruption](job), check=True)
        wait_for(lambda: queue_state(job) == "PENDING", 60, "the requeued job to be pending")
        # SLURM holds a requeued job back ~2 minutes (BeginTime); start it now, but not within the second
        # of the kill: slurmd refuses a launch whose credential is no newer than the job's revocation (1-s
        # resolution): slurmctld logs "Killing non-startable batch JobId=N: Job credential revoked" and the
        # job ends FAILED without a second attempt (seen in CI when the restart came 0.7 s after the kill)
        time.sleep(2)
        subprocess.run(["scontrol", "update", f"jobid={job}", "starttime=now"], check=True)
        if proc.wait(timeout=600) != 0:  # the console and every attempt's job log, to tell why
            job_logs = "".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(sweep.glob(".submitit/*/*_log.*")))
            pytest.fail(f"{log.read_text()[-3000:]}\n{job_logs}")
    finally:
        proc.kill()
    seconds = time.monotonic() - started
    (job_dir,) = [p.parent for p in sweep.glob("*/results.csv")]
    train_log = (job_dir / "train.log").read_text()
    assert "resuming from" in train_log  # it was interrupted mid-training and resumed from last.ckpt
    # the second attempt fenced the folder (a first attempt still running could no longer write there)
    assert (job_dir / ".slurm_attempt").read_text().strip() == f"{job}.r1"
    assert "0 of 108 clips needed an upstream forward" in train_log  # the second start read the cache
    job_logs = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.*"))
    assert "DUE TO JOB REQUEUE" in job_logs or "Requeued" in job_logs or "requeue" in job_logs.lower()
    a = pd.read_csv(one_process_train / "results.csv")
    b = pd.read_csv(job_dir / "results.csv")
    columns = ["test", "best_step", "best_dev_mse", "cohens_d", "speat_d", "mean_pred_x", "mean_pred_y"]
    # the resumed head continues from the epoch-end checkpoint with the batches the uninterrupted run
    # would have seen, on the same machine and kernels: identical numbers
    pd.testing.assert_frame_equal(b[columns], a[columns], check_exact=True)
    assert pd.read_csv(sweep / "sweep_status.csv")["status"].tolist() == ["ok"]
    print(f"\nrequeued train.py job ({interruption}): {seconds:.1f} s in all")
