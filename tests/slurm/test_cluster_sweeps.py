"""Sweeps on a real one-node SLURM cluster, as a user types them: the same report as the local
launcher, errors as one line, requests no node can satisfy stopped before submission, a pending
job's reason, a cancelled job reported. Slow; skipped where sbatch does not answer."""

from __future__ import annotations

import subprocess
import time

import pandas as pd
import pytest

from slurm.cluster import CPU_JOB, job_ids, needs_cluster, queue_state, run, start, wait_for

pytestmark = [pytest.mark.slow, needs_cluster]

DEMO_SWEEP = ["-m", "upstream=fbank,mfcc", "bias_test=demo_voice", "logger=none", "speat.n_permutations=2000"]
# columns that name where or when a run happened, not what it found
WHERE_AND_WHEN = ["run_dir", "overrides", "n_upstream_forwards"]


def test_the_demo_sweep_through_slurm_gives_the_local_launchers_report(tmp_path):
    started = time.monotonic()
    slurm = run(
        "evaluate.py", *DEMO_SWEEP, *CPU_JOB, f"hydra.sweep.dir={tmp_path / 'slurm'}", cache=tmp_path / "cache_slurm"
    )
    slurm_s = time.monotonic() - started
    assert slurm.returncode == 0, slurm.stdout[-3000:] + slurm.stderr[-3000:]
    assert "Bypassing sacct" not in slurm.stdout + slurm.stderr
    local = run("evaluate.py", *DEMO_SWEEP, f"hydra.sweep.dir={tmp_path / 'local'}", cache=tmp_path / "cache_local")
    assert local.returncode == 0, local.stderr[-3000:]
    statuses = pd.read_csv(tmp_path / "slurm" / "sweep_status.csv")
    assert list(statuses["status"]) == ["ok", "ok"]
    reports = {}
    for name in ("slurm", "local"):
        proc = run("evaluate.py", "task=report", f"sweep_dir={tmp_path / name}", "logger=none", cache=tmp_path / name)
        assert proc.returncode == 0, proc.stderr[-3000:]
        reports[name] = {
            t: pd.read_csv(tmp_path / name / "report" / f"{t}.csv") for t in ("results", "layers", "appendix_d")
        }
    for table, frame in reports["slurm"].items():
        other = reports["local"][table]
        keep = [c for c in frame.columns if c not in WHERE_AND_WHEN]
        # the same clips, models and permutation seeds: identical numbers, not merely close
        pd.testing.assert_frame_equal(frame[keep], other[keep], check_exact=True)
    print(f"\nSLURM demo sweep (2 array jobs): {slurm_s:.1f} s")


def test_a_failed_sweep_with_markup_in_its_error_prints_the_table_and_exits_1(tmp_path):
    proc = run(
        "evaluate.py",
        "-m",
        "upstream=fbank,mfcc",
        "logger=none",
        "bias_test.manifest='/tmp/[/x]/m.csv'",
        "hydra.callbacks.preflight.enabled=false",  # the jobs themselves must fail (no pre-flight stop)
        *CPU_JOB,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 failed of 2 job(s)" in proc.stdout and "/tmp/[/x]/m.csv" in proc.stdout.replace("\n", "")
    errors = pd.read_csv(tmp_path / "sweep" / "sweep_status.csv")["error"]
    assert all(e.startswith("bias_test.manifest=") and "\n" not in e and len(e) < 300 for e in errors)


# an upstream whose cold jobs need a forward: the configured set is checked
COLD = "upstream=tiny_wav2vec2"
# weight-free jobs with the CPU trainer need no GPU: only the statistics set is checked
NO_FORWARD = "upstream=fbank"


@pytest.mark.parametrize(
    "overrides, setting",
    [
        ([COLD], "hydra.launcher.gpus_per_node=1: partition"),  # the launcher's GPU-cluster defaults
        ([COLD, "hydra.launcher.gpus_per_node=0"], "hydra.launcher.cpus_per_task=8 x tasks_per_node=1"),
        (
            [COLD, "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=4096"],
            "hydra.launcher.mem_gb=4096",
        ),
        (
            [
                COLD,
                "hydra.launcher.gpus_per_node=0",
                "hydra.launcher.cpus_per_task=1",
                "hydra.launcher.mem_gb=2",
                "hydra.launcher.tasks_per_node=2",
            ],
            "hydra.launcher.tasks_per_node=2 starts several ranks per job",
        ),
        ([NO_FORWARD, "hydra.launcher.statistics.mem_gb=4096"], "hydra.launcher.statistics.mem_gb=4096: the largest"),
        ([NO_FORWARD, "hydra.launcher.statistics.enabled=false"], "hydra.launcher.gpus_per_node=1: partition"),
    ],
    ids=["gres", "cpus", "memory", "ranks_without_ddp", "statistics_memory", "statistics_off"],
)
def test_a_request_no_node_can_satisfy_stops_before_submission_with_one_line(tmp_path, overrides, setting):
    proc = run(
        "evaluate.py",
        "-m",
        "logger=none",
        "hydra/launcher=slurm",
        *overrides,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cache=tmp_path / "cache",
        timeout=120,
    )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {setting}"), proc.stderr
    assert job_ids(tmp_path / "sweep") == []  # nothing was submitted


def test_a_pending_job_prints_its_reason_and_a_cancelled_one_is_reported(tmp_path):
    """A job held back (--begin in 10 minutes) prints its SLURM reason after pending_report_s; scancel
    then ends it: the sweep ends with its table, the job failed with the reason, exit 1."""
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    proc = start(
        "evaluate.py",
        "-m",
        "upstream=fbank",
        "logger=none",
        *CPU_JOB,
        "hydra.launcher.pending_report_s=2",
        "+hydra.launcher.additional_parameters.begin=now+600",
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
        log=log,
    )
    try:
        wait_for(lambda: "pending for" in log.read_text(), 60, "the pending line")
        line = next(ln for ln in log.read_text().splitlines() if "pending for" in ln)
        (job,) = job_ids(sweep)
        assert line.startswith(f"SLURM job {job} (upstream=fbank logger=none) pending for") and line.endswith(
            ": BeginTime"
        ), line
        subprocess.run(["scancel", job], check=True)
        assert proc.wait(timeout=60) == 1
    finally:
        proc.kill()
    rows = pd.read_csv(sweep / "sweep_status.csv")
    assert list(rows["status"]) == ["failed"]
    assert rows["error"][0].startswith(f"SLURM job {job} cancelled"), rows["error"][0]


def test_scancel_of_one_array_job_leaves_the_others_results(tmp_path):
    sweep, log = tmp_path / "sweep", tmp_path / "console.log"
    proc = start("evaluate.py", *DEMO_SWEEP, *CPU_JOB, f"hydra.sweep.dir={sweep}", cache=tmp_path / "cache", log=log)
    try:
        ids = wait_for(lambda: len(job_ids(sweep)) == 2 and job_ids(sweep), 60, "two submitted jobs")
        wait_for(lambda: queue_state(ids[1]) == "RUNNING", 60, f"job {ids[1]} running")
        subprocess.run(["scancel", ids[1]], check=True)
        assert proc.wait(timeout=300) == 1, log.read_text()[-3000:]
    finally:
        proc.kill()
    rows = pd.read_csv(sweep / "sweep_status.csv").set_index("job")
    fbank, mfcc = (f"bias_test=demo_voice,speat.n_permutations=2000,upstream={u}" for u in ("fbank", "mfcc"))
    assert rows.loc[fbank, "status"] == "ok" and (sweep / fbank / "results.csv").is_file()
    assert rows.loc[mfcc, "status"] == "failed"
    assert rows.loc[mfcc, "error"].startswith(f"SLURM job {ids[1]} cancelled"), rows.loc[mfcc, "error"]
