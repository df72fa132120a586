"""Job status files and their collection into sweep_status.csv (the same for basic, joblib and submitit
jobs: only the job folders are read)."""

from __future__ import annotations

import csv
import io
import os

import pytest
from omegaconf import OmegaConf

from speechbias.launch.sweep_status import (
    NO_END,
    STATUS_CSV,
    SWEEP_ID_ENV,
    JobStatus,
    SweepStatusCallback,
    collect_statuses,
    count_line,
    print_status_table,
    reused_status,
    write_status_csv,
)
from speechbias.results.job_status import incomplete_reason


def _job(sweep, name, status, sweep_id="s1", **kw):
    job = sweep / name
    (job / ".hydra").mkdir(parents=True)
    JobStatus(status, overrides=name.split(","), sweep_id=sweep_id, **kw).write(job)
    return job


@pytest.fixture
def sweep(tmp_path):
    """A SLURM-style sweep folder: job folders, a .submitit folder, and one job of an earlier sweep."""
    root = tmp_path / "sweep"
    _job(root, "upstream=b,bias_test=t", "failed", seconds=3.25, error="bias_test.manifest=/x.csv: no such file")
    _job(root, "upstream=a,bias_test=t", "ok", seconds=12.0)
    _job(root, "upstream=c,bias_test=t", "skipped", seconds=0.04)
    _job(root, "upstream=d,bias_test=t", "running", seconds=0.0)
    _job(root, "upstream=e,bias_test=t", "ok", sweep_id="earlier")
    (root / ".submitit" / "123_0").mkdir(parents=True)
    (root / "upstream=f,bias_test=t" / ".hydra").mkdir(parents=True)  # never started: no status
    return root


def test_statuses_of_one_sweep_are_collected_in_folder_order(sweep):
    rows = collect_statuses(sweep, "s1")
    assert [r.job for r in rows] == [f"upstream={m},bias_test=t" for m in "abcd"]
    assert [r.status for r in rows] == ["ok", "failed", "skipped", "failed"]
    assert rows[1].error == "bias_test.manifest=/x.csv: no such file" and rows[1].seconds == 3.2
    assert rows[3].error == NO_END  # a job that never recorded its end (killed by SLURM, out of memory)
    assert len(collect_statuses(sweep)) == 5  # without an id: every job with a status file
    assert count_line(rows) == "1 ok, 1 skipped, 2 failed of 4 job(s)"


def test_status_csv_has_one_row_per_job(sweep, tmp_path):
    path = write_status_csv(collect_statuses(sweep, "s1"), tmp_path / STATUS_CSV)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["job", "overrides", "status", "seconds", "error", "reused"]
    assert [(r["status"], r["seconds"]) for r in rows] == [
        ("ok", "12.0"),
        ("failed", "3.2"),
        ("skipped", "0.0"),
        ("failed", "0.0"),
    ]
    assert rows[1]["overrides"] == "upstream=b bias_test=t"
    out = io.StringIO()
    print_status_table(collect_statuses(sweep, "s1"), path, file=out)
    text = out.getvalue()
    assert "bias_test.manifest=/x.csv: no such file" in text and "1 ok, 1 skipped, 2 failed of 4 job(s)" in text


def test_the_callback_writes_the_csv_and_exits_1_when_a_job_failed(sweep, monkeypatch, capsys):
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})
    monkeypatch.delenv(SWEEP_ID_ENV, raising=False)  # restored to unset after the test
    callback = SweepStatusCallback()
    callback.on_multirun_start(config)
    assert os.environ[SWEEP_ID_ENV]
    monkeypatch.setenv(SWEEP_ID_ENV, "s1")
    with pytest.raises(SystemExit) as info:
        callback.on_multirun_end(config)
    assert info.value.code == 1
    assert len(list(csv.DictReader((sweep / STATUS_CSV).open()))) == 4
    assert "2 failed" in capsys.readouterr().out
    # a sweep whose jobs all finished returns normally
    monkeypatch.setenv(SWEEP_ID_ENV, "earlier")
    callback.on_multirun_end(config)
    assert [r["status"] for r in csv.DictReader((sweep / STATUS_CSV).open())] == ["ok"]


def test_the_callback_reads_the_sweep_folder_resolved_when_the_multirun_started(sweep, monkeypatch, capsys):
    """A sub-second sweep folder resolves to another name at the end (a fresh ${now:}); the table reads the
    folder the sweep started with (it read an empty new folder: 0 job(s))."""
    ticks = iter(range(100))
    OmegaConf.register_new_resolver("test_tick", lambda: str(next(ticks)), replace=True)
    (sweep.parent / "0").symlink_to(sweep)
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep.parent) + "/${test_tick:}"}}})
    monkeypatch.delenv(SWEEP_ID_ENV, raising=False)
    callback = SweepStatusCallback()
    callback.on_multirun_start(config)
    monkeypatch.setenv(SWEEP_ID_ENV, "earlier")
    callback.on_multirun_end(config)
    assert str(config.hydra.sweep.dir) != str(sweep.parent / "0")  # resolving again names another folder
    assert [r["status"] for r in csv.DictReader((sweep / STATUS_CSV).open())] == ["ok"]
    assert "1 ok of 1 job(s)" in capsys.readouterr().out


def test_incomplete_reason_reads_the_status_then_the_log(sweep):
    assert incomplete_reason(sweep / "upstream=b,bias_test=t") == "failed: bias_test.manifest=/x.csv: no such file"
    assert incomplete_reason(sweep / "upstream=d,bias_test=t") == NO_END
    job = sweep / "upstream=f,bias_test=t"
    assert incomplete_reason(job).startswith("no status or error recorded")
    (job / "train.log").write_text("[INFO] start\n[ERROR] CorpusError: /data/mess: no such folder\n[INFO] end\n")
    assert incomplete_reason(job) == "failed (from its log): [ERROR] CorpusError: /data/mess: no such folder"


def test_markup_in_an_error_is_shown_verbatim_and_the_sweep_exits_1(tmp_path, monkeypatch, capsys):
    """rich markup in error text ([/x] closes no tag) once crashed the table and the sweep exited 0."""
    root = tmp_path / "sweep"
    error = "bias_test.manifest=/tmp/[/x]/m.csv: no such file [bold]"
    _job(root, "upstream=a", "failed", error=error)
    _job(root, "upstream=[b]", "ok")
    monkeypatch.setenv(SWEEP_ID_ENV, "s1")
    with pytest.raises(SystemExit) as info:
        SweepStatusCallback().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(root)}}}))
    assert info.value.code == 1
    out = capsys.readouterr().out.replace("\n", "")
    assert "/tmp/[/x]/m.csv" in out and "[bold]" in out and "upstream=[b]" in out


def test_a_table_that_cannot_be_shown_still_exits_1(sweep, monkeypatch):
    import speechbias.launch.sweep_status as sweep_status

    def broken(*args, **kwargs):
        raise RuntimeError("terminal gone")

    monkeypatch.setattr(sweep_status, "print_status_table", broken)
    monkeypatch.setenv(SWEEP_ID_ENV, "s1")
    with pytest.raises(SystemExit) as info:
        SweepStatusCallback().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    assert info.value.code == 1 and (sweep / STATUS_CSV).is_file()


def test_a_jobs_error_is_its_type_and_the_last_line_of_its_message():
    from speechbias.launch.sweep_status import job_error
    from speechbias.errors import ConfigError

    worker = RuntimeError(
        "\n\n-- Process 1 terminated with the following error:\nTraceback (most recent call last):\n"
        '  File "/__w/pytorch/x.py", line 3, in f\n    raise ValueError("bad")\nValueError: bad\n'
    )
    assert job_error(worker) == "RuntimeError: ValueError: bad"
    assert job_error(KeyError()) == "KeyError"
    assert job_error(ConfigError("lr=abc: not a number")) == "lr=abc: not a number"


def test_record_failure_keeps_what_the_job_said(sweep):
    from speechbias.launch.sweep_status import read_status, record_failure

    running = sweep / "upstream=d,bias_test=t"
    assert record_failure(running, "SLURM job 3_1 cancelled (scancel or an administrator)")
    assert read_status(running).status == "failed" and read_status(running).error.startswith("SLURM job 3_1")
    failed = sweep / "upstream=b,bias_test=t"
    assert not record_failure(failed, "SLURM job 3_0 exited with an error")
    assert read_status(failed).error == "bias_test.manifest=/x.csv: no such file"
    never = sweep / "upstream=g,bias_test=t"  # cancelled before it started: no folder yet
    assert record_failure(never, "SLURM job 3_2 cancelled", overrides=["upstream=g", "bias_test=t"], sweep_id="s1")
    assert read_status(never).overrides == ["upstream=g", "bias_test=t"]


def test_slurms_reason_goes_in_front_of_a_survivors_error(sweep):
    from speechbias.launch.sweep_status import read_status, record_failure

    job = sweep / "upstream=b,bias_test=t"
    assert record_failure(job, "SLURM job 9 exited with an error (task 1: Killed)", add_to_failed=True)
    assert read_status(job).error == (
        "SLURM job 9 exited with an error (task 1: Killed); the job said: bias_test.manifest=/x.csv: no such file"
    )
    assert not record_failure(job, "SLURM job 9 exited with an error (task 1: Killed)", add_to_failed=True)


def test_a_job_that_reuses_results_keeps_the_outcome_that_computed_them(tmp_path):
    """A rerun finding finished results: the row keeps ok and the original seconds and says reused; with no
    earlier ok record (an older version's folder) it reads skipped."""
    first = JobStatus("ok", overrides=["upstream=a"], seconds=12.34, started=1.0)
    again = reused_status(first, JobStatus("running", overrides=["upstream=a"], sweep_id="s2", started=100.0))
    assert (again.status, again.seconds, again.error, again.reused, again.sweep_id) == ("ok", 12.34, "", True, "s2")
    third = reused_status(again, JobStatus("running", sweep_id="s3", started=200.0))
    assert (third.status, third.seconds, third.reused) == ("ok", 12.34, True)
    assert reused_status(None, JobStatus("running", started=0.0)).status == "skipped"
    assert reused_status(JobStatus("running"), JobStatus("running", started=0.0)).status == "skipped"
    for name, status in (("upstream=a", third), ("upstream=b", JobStatus("ok", seconds=2.0, sweep_id="s3"))):
        status.write(tmp_path / name)
    rows = collect_statuses(tmp_path, "s3")
    assert count_line(rows) == "2 ok (1 reused) of 2 job(s)"
    csv_rows = list(csv.DictReader(write_status_csv(rows, tmp_path / STATUS_CSV).open()))
    assert [(r["status"], r["seconds"], r["reused"]) for r in csv_rows] == [("ok", "12.3", "yes"), ("ok", "2.0", "")]
    out = io.StringIO()
    print_status_table(rows, tmp_path / STATUS_CSV, file=out)
    assert "ok, reused" in out.getvalue()
