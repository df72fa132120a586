"""A requeued job's attempts and their job folder: once attempt r1 has started, attempt r0 (still
running on a node whose slurmd died) writes nothing more there; writes elsewhere are not its concern."""

from __future__ import annotations

import pytest

from speechbias.fileio import atomic_file
from speechbias.launch.slurm.attempt_fence import FENCE_FILE, AttemptFence, StaleAttemptError, attempt_id


def _write(path, text="x"):
    atomic_file.atomic_write(path, lambda tmp: tmp.write_text(text))


def test_the_attempt_id_is_the_job_and_its_restart_count():
    assert attempt_id("12_3", {"SLURM_RESTART_COUNT": "2"}) == "12_3.r2"
    assert attempt_id("12", {}) == "12.r0"  # a job's first start: SLURM sets no count


def test_a_stale_attempt_cannot_write_into_the_folder_once_its_requeued_copy_started(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_file, "WRITE_GUARDS", [])
    job_dir, elsewhere = tmp_path / "job", tmp_path / "cache" / "entry.bin"
    first = AttemptFence(job_dir, "7.r0")
    first.claim()
    atomic_file.add_write_guard(first)
    _write(job_dir / "job_status.json", "first")  # its own folder: allowed while it owns it
    assert (job_dir / FENCE_FILE).read_text().strip() == "7.r0"

    AttemptFence(job_dir, "7.r1").claim()  # the requeued copy starts (on another node)
    with pytest.raises(StaleAttemptError, match=r"^SLURM attempt 7\.r0 of this job is stale: attempt 7\.r1"):
        _write(job_dir / "job_status.json", "stale")
    assert (job_dir / "job_status.json").read_text() == "first"  # untouched, no temporary file left
    assert sorted(p.name for p in job_dir.iterdir()) == [FENCE_FILE, "job_status.json"]
    _write(elsewhere)  # outside the job folder (the shared cache): not fenced
    # the stale attempt starting late (slurmd back) does not take the folder back
    with pytest.raises(StaleAttemptError, match="not starting"):
        first.claim()
    # a new job (a sweep submitted again) takes the folder over
    AttemptFence(job_dir, "9.r0").claim()
    assert (job_dir / FENCE_FILE).read_text().strip() == "9.r0"
