"""A full or read-only disk, for real (a small tmpfs in a mount namespace): one line naming the file and the
setting that moves its folder, exit 1, never a traceback, whichever write meets it (Hydra's config save,
job_status.json, the feature cache, results, Lightning's checkpoints); the pre-launch check refuses a run
that will not fit, and says how to skip it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from faults.namespace_disk import (
    ENV,
    REPO,
    assert_one_error_line,
    entry_command,
    namespaces_or_skip,
    run_on_small_disk,
)

FAST = ("logger=none", "speat.n_permutations=1000", "speat.per_layer=false")
TRAIN_FAST = ("logger=none", "max_steps=200", "bias_tests=[demo_voice]", "++trainer.enable_progress_bar=false")
SKIP_CHECK = "hydra.callbacks.storage_check.enabled=false"
RESULT_FILES = ("results.json", "results.csv", "layers.csv", "layers.json", "report.md")


@pytest.fixture(autouse=True)
def _namespaces():
    namespaces_or_skip()


def _warm_cache(tmp_path, script="evaluate", *overrides):
    """A cache holding the run's clips (on the real disk), so a run on the small disk only writes results."""
    cache = tmp_path / "cache"
    proc = subprocess.run(
        entry_command(script, *overrides, f"paths.cache_dir={cache}", f"hydra.run.dir={tmp_path / 'warm'}"),
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cache


@pytest.mark.slow
def test_output_folder_full_at_start_is_one_line_before_hydra_saves_its_config(tmp_path):
    disk, cache = tmp_path / "disk", _warm_cache(tmp_path, "evaluate", *FAST)
    run = disk / "run"
    command = entry_command("evaluate", *FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={run}")
    full = run_on_small_disk(disk, 256, command)
    line = assert_one_error_line(full, str(run), "hydra.run.dir=", "free on its disk", SKIP_CHECK)
    assert "Hydra's config save" in line
    # the check skipped: room for Hydra's own save is still checked (Hydra's save would be a traceback)
    skipped = run_on_small_disk(disk, 256, [*command, SKIP_CHECK])
    line = assert_one_error_line(skipped, str(run), "hydra.run.dir=")
    assert SKIP_CHECK not in line


@pytest.mark.slow
def test_a_run_that_will_not_fit_is_refused_before_it_starts_and_fits_elsewhere(tmp_path):
    disk, cache = tmp_path / "disk", _warm_cache(tmp_path, "train", *TRAIN_FAST)
    run = disk / "run"
    command = entry_command("train", *TRAIN_FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={run}")
    # 600 KiB free: Hydra's save fits, train.py's two checkpoints and figures do not
    refused = run_on_small_disk(disk, 600, command, fill_kib=0, keep=tmp_path / "kept")
    line = assert_one_error_line(refused, "checkpoints", "hydra.run.dir=", SKIP_CHECK)
    assert not (tmp_path / "kept" / "run").exists(), "refused before Hydra made the folder"
    fits = run_on_small_disk(disk, 8192, command, fill_kib=0, keep=tmp_path / "kept")
    assert fits.returncode == 0, fits.stderr[-3000:]
    assert (tmp_path / "kept" / "run" / "results.json").is_file(), line


@pytest.mark.slow
def test_a_sweep_that_will_not_fit_is_refused_before_any_job_starts(tmp_path):
    """Two tests on one upstream: 60 distinct clips (their 20 shared attribute clips once), 8 KiB each in the
    cache (an entry and an index record, a 4 KiB block each), on a 400 KiB disk that would take one test's
    40 clips but not the sweep's: refused in one line before any job; on a larger disk it runs."""
    disk = tmp_path / "disk"
    cache, sweep = disk / "cache", tmp_path / "sweep"
    tests = "bias_test=demo_voice,demo_accent"
    command = entry_command("evaluate", "-m", tests, *FAST, f"paths.cache_dir={cache}", f"hydra.sweep.dir={sweep}")
    refused = run_on_small_disk(disk, 400, command, fill_kib=0)
    line = assert_one_error_line(refused, str(cache), "this sweep will write about", "cache entries", SKIP_CHECK)
    assert "60 cache entries" in line, line
    assert not sweep.exists(), "refused before Hydra made the sweep folder"
    fits = run_on_small_disk(disk, 4096, command, fill_kib=0)
    assert fits.returncode == 0, fits.stderr[-3000:]
    assert len(list(sweep.glob("*/results.json"))) == 2


@pytest.mark.slow
def test_cache_full_during_extraction(tmp_path):
    disk = tmp_path / "disk"
    cache = disk / "cache"
    command = entry_command("evaluate", *FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={tmp_path / 'run'}")
    # the estimate: 40 clips of the demo test not cached, an entry and an index record each
    refused = run_on_small_disk(disk, 200, command, fill_kib=0)
    assert_one_error_line(refused, str(cache), "cache entries", "paths.cache_dir=", SKIP_CHECK)
    # check skipped: the cache fills during extraction (or while the clips' index records are written)
    full = run_on_small_disk(disk, 200, [*command, SKIP_CHECK], fill_kib=0)
    line = assert_one_error_line(full, str(cache) + "/", "No space left on device", "paths.cache_dir=")
    assert line.split(":")[1].strip().endswith((".safetensors", ".json")), line
    status = json.loads((tmp_path / "run" / "job_status.json").read_text())
    assert status["status"] == "failed" and "No space left" in status["error"]


@pytest.mark.slow
def test_output_folder_full_while_results_are_written(tmp_path):
    """The disk fills at each write in turn (1 KiB steps of free space): each run ends complete (exit 0) or
    with one line naming the file it could not write, under the run folder, and the setting that moves it."""
    disk, cache = tmp_path / "disk", _warm_cache(tmp_path, "evaluate", *FAST)
    run = disk / "run"
    command = entry_command("evaluate", *FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={run}", SKIP_CHECK)
    named, finished = set(), 0
    for free_kib in range(60, 16, -4):
        proc = run_on_small_disk(disk, 256, command, fill_kib=256 - free_kib)
        if proc.returncode == 0:
            finished += 1
            continue
        line = assert_one_error_line(proc, "hydra.run.dir=")
        named.add(line.split(": ")[1].rsplit("/", 1)[-1])
    assert finished >= 1, "no run had room to finish"
    assert named & set(RESULT_FILES), named  # at least one failure while the results themselves were written


@pytest.mark.slow
def test_checkpoint_on_a_full_disk_is_one_line(tmp_path):
    disk, cache = tmp_path / "disk", _warm_cache(tmp_path, "train", *TRAIN_FAST)
    run = disk / "run"
    command = entry_command("train", *TRAIN_FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={run}", SKIP_CHECK)
    # room for Hydra's save and the first files, not for a checkpoint (~270 KiB)
    proc = run_on_small_disk(disk, 200, command, fill_kib=0)
    assert_one_error_line(proc, str(run / "checkpoints"), ".ckpt", "No space left on device", "hydra.run.dir=")


@pytest.mark.slow
def test_read_only_output_and_cache_folders(tmp_path):
    disk, cache = tmp_path / "disk", _warm_cache(tmp_path, "evaluate", *FAST)
    run = disk / "run"
    ro_run = run_on_small_disk(
        disk,
        256,
        entry_command("evaluate", *FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={run}"),
        folders=("run",),
        fill_kib=0,
        read_only=True,
    )
    assert_one_error_line(ro_run, "Read-only file system", "hydra.run.dir=")
    ro_cache = run_on_small_disk(
        disk,
        256,
        entry_command("evaluate", *FAST, f"paths.cache_dir={disk / 'cache'}", f"hydra.run.dir={tmp_path / 'r'}"),
        folders=("cache",),
        fill_kib=0,
        read_only=True,
    )
    assert_one_error_line(ro_cache, "Read-only file system", "paths.cache_dir=")


@pytest.mark.slow
def test_a_folder_without_write_permission_is_one_line(tmp_path, request):
    """EACCES as a user who may not write (root may write anywhere, so the run drops to nobody)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the command as another user")
    base = Path(tempfile.mkdtemp(prefix="speechbias-eacces-"))  # pytest's own folder is root's only (0700)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    os.chmod(base, 0o755)
    shutil.copytree(_warm_cache(tmp_path, "evaluate", *FAST), base / "cache")
    subprocess.run(["chmod", "-R", "a+rwX", str(base / "cache")], check=True)
    cache, locked, home = base / "cache", base / "locked", base / "home"
    locked.mkdir(mode=0o555)
    os.chmod(locked, 0o555)
    home.mkdir()
    os.chmod(home, 0o777)
    probe = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", "import speechbias"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run this checkout's Python: {probe.stderr.strip()[-200:]}")
    proc = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        + entry_command("evaluate", *FAST, f"paths.cache_dir={cache}", f"hydra.run.dir={locked / 'run'}"),
        env={**os.environ, **ENV, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert_one_error_line(proc, "Permission denied", "hydra.run.dir=")
