"""Reading squeue, reporting pending jobs, and saying why a job ended without a result."""

from __future__ import annotations

import io

from speechbias.launch.slurm.queue import PendingReporter, QueueEntry, failure_reason, parse_squeue


def test_squeue_lines_by_job_id():
    entries = parse_squeue("12_0|PENDING|PartitionConfig\n12_1|RUNNING|None\nnoise\n")
    assert entries == {
        "12_0": QueueEntry("12_0", "PENDING", "PartitionConfig"),
        "12_1": QueueEntry("12_1", "RUNNING", "None"),
    }


def test_a_pending_job_is_reported_after_the_delay_once_per_reason():
    now = [0.0]
    out = io.StringIO()
    reporter = PendingReporter(after_s=60, clock=lambda: now[0], file=out)
    pending = {"12_0": QueueEntry("12_0", "PENDING", "PartitionConfig"), "12_1": QueueEntry("12_1", "RUNNING", "None")}
    labels = {"12_0": "upstream=fbank", "12_1": "upstream=mfcc"}
    now[0] = 59
    reporter.update(pending, labels)
    assert out.getvalue() == ""
    now[0] = 61
    reporter.update(pending, labels)
    reporter.update(pending, labels)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("SLURM job 12_0 (upstream=fbank) pending for 61 s: PartitionConfig")
    assert "hydra.launcher.cpus_per_task" in lines[0]
    reporter.update({"12_0": QueueEntry("12_0", "PENDING", "Resources")}, labels)
    assert out.getvalue().splitlines()[-1].endswith("pending for 61 s: Resources")


def test_failure_reason_names_the_failed_task_and_slurms_line(tmp_path):
    err = tmp_path / "9_0_log.err"
    err.write_text(
        "srun: error: localhost: task 1: Killed\nsrun: launch/slurm: _step_signal: Terminating StepId=9.0\n"
        "slurmstepd-localhost: error: *** STEP 9.0 ON localhost CANCELLED AT 2026-12-03T08:06:00 ***\n"
        "srun: error: localhost: task 0: Killed\n"
    )
    line = failure_reason("9", "FAILED", [err, tmp_path / "absent.out"])
    assert line == (f"SLURM job 9 exited with an error (task 1: Killed; CANCELLED AT 2026-12-03T08:06:00); log: {err}")
    timeout = tmp_path / "t.err"
    timeout.write_text("slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***\n")
    assert "DUE TO TIME LIMIT" in failure_reason("5_0", "TIMEOUT", [timeout])
    assert failure_reason("7_1", "CANCELLED") == "SLURM job 7_1 cancelled (scancel or an administrator)"
    assert "no longer in the queue" in failure_reason("7_2", None)
