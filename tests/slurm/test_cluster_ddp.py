"""``evaluate.py`` and ``train.py`` as one SLURM job of 2 tasks under CPU DDP (one rank per task,
gloo) give the numbers of one process; a rank that dies ends its job at once. Slow; skipped where
sbatch does not answer."""

from __future__ import annotations

import os
import signal
import time

import pandas as pd
import pytest

from slurm.cluster import (
    CPU_JOB,
    cancel_jobs,
    ddp_started,
    ran_two_ranks,
    TWO_RANKS,
    job_ids,
    needs_cluster,
    queue_state,
    run,
    start,
    step_pids,
    wait_for,
)
from slurm.conftest import TRAIN_STEPS

pytestmark = [pytest.mark.slow, needs_cluster]

TWO_TASK_JOB = [*CPU_JOB, *TWO_RANKS]


def test_evaluate_as_two_ranks_equals_one_process(tmp_path):
    args = ["upstream=fbank", "bias_test=demo_voice", "logger=none", "speat.n_permutations=20000"]
    one = run("evaluate.py", *args, f"hydra.run.dir={tmp_path / 'one'}", cache=tmp_path / "cache_one")
    assert one.returncode == 0, one.stderr[-3000:]
    started = time.monotonic()
    two = run(
        "evaluate.py", "-m", *args, *TWO_TASK_JOB, f"hydra.sweep.dir={tmp_path / 'sweep'}", cache=tmp_path / "cache_two"
    )
    seconds = time.monotonic() - started
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    (job_dir,) = [p.parent for p in (tmp_path / "sweep").glob("*/results.csv")]
    assert ran_two_ranks(tmp_path / "sweep")
    a, b = pd.read_csv(tmp_path / "one" / "results.csv").iloc[0], pd.read_csv(job_dir / "results.csv").iloc[0]
    assert b["n_upstream_forwards"] >= 40  # both ranks' forwards summed (the sampler may repeat a batch)
    # Each clip's statistics come from its own forward on either rank (batch-invariant upstream), and
    # d and p are computed once, on rank zero, from the same float32 cache values with the same
    # permutation seed: identical, not merely close.
    assert (b["d"], b["p"]) == (a["d"], a["p"])
    layers_a, layers_b = pd.read_csv(tmp_path / "one" / "layers.csv"), pd.read_csv(job_dir / "layers.csv")
    assert list(layers_b["d"]) == list(layers_a["d"]) and list(layers_b["p"]) == list(layers_a["p"])
    print(f"\nevaluate.py, one SLURM job of 2 tasks: {seconds:.1f} s; d {b['d']!r} vs {a['d']!r}, p {b['p']!r}")


def test_train_as_two_ranks_equals_one_process(tmp_path, one_process_train):
    started = time.monotonic()
    two = run(
        "train.py",
        "-m",
        "upstream=fbank",
        f"max_steps={TRAIN_STEPS}",
        "logger=none",
        *TWO_TASK_JOB,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cache=tmp_path / "cache",
    )
    seconds = time.monotonic() - started
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    (job_dir,) = [p.parent for p in (tmp_path / "sweep").glob("*/results.csv")]
    assert ran_two_ranks(tmp_path / "sweep")
    a = pd.read_csv(one_process_train / "results.csv").set_index("test")
    b = pd.read_csv(job_dir / "results.csv").set_index("test")
    assert list(b.index) == list(a.index) == ["demo_voice", "demo_accent"]
    # SpEAT d: the same cached statistics, computed once: identical
    assert list(b["speat_d"]) == list(a["speat_d"])
    # The two ranks take the two halves of each global batch (batch_size is global), so every step
    # sees the rows one process sees; DDP averages the two half-batch gradients where one process
    # takes the gradient of the whole batch: equal up to float32 summation order (~1e-7 relative per
    # step). Over 2,000 Adam steps that stays far below 1e-4 relative, and the best dev step is the same.
    assert list(b["best_step"]) == list(a["best_step"])
    for column in ("best_dev_mse", "best_dev_r2", "cohens_d", "mean_pred_x", "mean_pred_y"):
        assert list(b[column]) == pytest.approx(list(a[column]), rel=1e-4), column
    diffs = {c: float((b[c] - a[c]).abs().max()) for c in ("best_dev_mse", "cohens_d")}
    print(
        f"\ntrain.py, one SLURM job of 2 tasks, {TRAIN_STEPS} steps: {seconds:.1f} s; largest |DDP - one process|: "
        f"{diffs}; dev MSE {list(b['best_dev_mse'])} vs {list(a['best_dev_mse'])}"
    )


def test_a_rank_that_dies_ends_the_whole_job_at_once(tmp_path):
    """Rank 1 killed (as by the OOM killer) mid-training: srun --kill-on-bad-exit ends rank 0 within
    seconds instead of leaving it in a collective until the time limit; the sweep reports it, exit 1."""
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    proc = start(
        "train.py",
        "-m",
        "upstream=fbank",
        "max_steps=100000",
        "logger=none",
        *TWO_TASK_JOB,
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
        log=log,
    )
    try:
        (job,) = wait_for(lambda: job_ids(sweep), 60, "the job's submission")
        pids = wait_for(lambda: len(step_pids(job)) == 2 and step_pids(job), 120, "two running ranks")
        wait_for(lambda: ddp_started(sweep), 120, "DDP to start")
        time.sleep(2)
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: queue_state(job) not in ("RUNNING", "COMPLETING"), 60, "the job to end")
        ended_s = time.monotonic() - killed
        assert proc.wait(timeout=60) == 1, log.read_text()[-3000:]
    finally:
        proc.kill()
        cancel_jobs(sweep)
    assert ended_s < 30
    row = pd.read_csv(sweep / "sweep_status.csv").iloc[0]
    # SLURM's line (the cause) first, then what the surviving rank recorded (its peer went away)
    assert row["status"] == "failed" and row["error"].startswith(
        f"SLURM job {job} exited with an error (task 1: Killed"
    )
    assert "\n" not in row["error"]
    print(f"\nthe job ended {ended_s:.1f} s after its rank 1 was killed")


def test_two_ranks_never_resume_another_configs_checkpoints(tmp_path, one_process_train):
    """A 2-task job started in a folder whose checkpoints another config wrote (lr=1e-4, one process):
    rank 0 moves them aside and records this config's digest before any rank builds its Trainer; rank 1
    waits for that, so neither resumes the stale checkpoint and the job equals the reference run."""
    sweep = tmp_path / "sweep"
    stale = run(
        "train.py",
        "upstream=fbank",
        "max_steps=300",
        "lr=1e-4",
        "logger=none",
        f"hydra.run.dir={sweep / 'job'}",
        cache=tmp_path / "cache",
    )
    assert stale.returncode == 0, stale.stderr[-3000:]
    assert (sweep / "job" / "checkpoints" / "last.ckpt").is_file()
    two = run(
        "train.py",
        "-m",
        "upstream=fbank",
        f"max_steps={TRAIN_STEPS}",
        "logger=none",
        *TWO_TASK_JOB,
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=job",
        cache=tmp_path / "cache",
    )
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    job = sweep / "job"
    assert ran_two_ranks(sweep)
    assert (job / "checkpoints.stale-1" / "last.ckpt").is_file()
    logs = "".join(p.read_text() for p in job.rglob("*.log"))
    assert "resuming from" not in logs
    a = pd.read_csv(one_process_train / "results.csv").set_index("test")
    b = pd.read_csv(job / "results.csv").set_index("test")
    assert list(b["best_step"]) == list(a["best_step"])
    for column in ("best_dev_mse", "cohens_d"):
        assert list(b[column]) == pytest.approx(list(a[column]), rel=1e-4), column
