"""``python evaluate.py task=report sweep_dir=...`` as typed, on folders that hold nothing to report."""

from __future__ import annotations

from entry_commands import run_entry


def test_report_of_a_folder_with_no_runs_is_one_error_line_and_writes_nothing(tmp_path):
    empty = tmp_path / "sweep"
    (empty / "notes").mkdir(parents=True)  # a folder, but no job folder below it
    done = run_entry("evaluate.py", "task=report", f"sweep_dir={empty}", "logger=none", timeout=300)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: sweep_dir {empty}: no job folders"), done.stderr
    assert "multirun/paper_speat" in lines[0]  # an experiment's fixed folder as the example
    assert "sweep report of" not in done.stdout + done.stderr
    assert not (empty / "report").exists() and not list(tmp_path.rglob("report.md"))
