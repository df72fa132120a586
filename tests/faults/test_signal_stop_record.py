"""What a stop signal leaves: the exit code a shell reports for it, the one line, the job's record, and the
stop crossing from a parallel sweep's worker to the sweep's process (pickled by loky) unchanged."""

from __future__ import annotations

import json
import pickle
import signal

from speechbias.launch.signals import RunStopped
from speechbias.results.job_status import JobStatus, mark_stopped, read_status


def test_the_exit_code_is_128_plus_the_signal_and_the_line_names_signal_phase_and_the_way_on():
    stop = RunStopped(signal.SIGTERM, "extraction")
    assert (stop.exit_code, RunStopped(signal.SIGINT).exit_code) == (143, 130)  # as bash reports kill -TERM / ^C
    assert stop.line() == "speechbias: stopped by SIGTERM during extraction; rerun the same command to resume"
    assert RunStopped(signal.SIGTERM, "").error == "stopped by SIGTERM"
    assert not isinstance(stop, Exception)  # no `except Exception` of a library swallows it


def test_a_stop_pickles_unchanged():
    stop = pickle.loads(pickle.dumps(RunStopped(signal.SIGINT, "training")))
    assert (stop.signum, stop.phase, stop.error) == (signal.SIGINT, "training", "stopped by SIGINT during training")


def test_a_running_job_is_marked_stopped_and_a_job_that_recorded_its_end_keeps_it(tmp_path):
    JobStatus("running", overrides=["seed=1"], started=1.0, pid=42).write(tmp_path / "a")
    assert mark_stopped(tmp_path / "a", "stopped by SIGTERM during statistics", "SIGTERM")
    record = json.loads((tmp_path / "a" / "job_status.json").read_text())
    assert (record["status"], record["signal"], record["error"]) == (
        "failed",
        "SIGTERM",
        "stopped by SIGTERM during statistics",
    )
    assert record["overrides"] == ["seed=1"] and record["pid"] == 42 and record["seconds"] > 0
    JobStatus("ok", seconds=3.0).write(tmp_path / "b")
    assert not mark_stopped(tmp_path / "b", "stopped by SIGTERM during writing", "SIGTERM")
    assert read_status(tmp_path / "b").status == "ok"
