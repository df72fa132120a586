"""A SpEAT job of several pairs, typed as a user types it: ``python evaluate.py 'bias_test=[a,b]'
'aggregation=[x,y]'`` reads each clip's cached statistics once and writes every pair into
``<job>/<test>/<aggregation>/`` exactly as the one-pair jobs write them; the sweep report reads them as it
reads a sweep of one-pair jobs; a stopped job computes only its missing pairs when run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
FAST = ("upstream=fbank", "speat.n_permutations=1000", "logger=none")
TESTS = ("demo_voice", "demo_accent")
AGGREGATIONS = ("mean_sum", "max_q3")
LISTS = (f"bias_test=[{','.join(TESTS)}]", f"aggregation=[{','.join(AGGREGATIONS)}]")
PAIR_FILES = ("results.csv", "results.json", "layers.csv", "layers.json", "tracker_log.jsonl")

# counts the cache reads of the warm path (read_stacked: every entry a run reads, one call per read) and
# prints them at exit; then runs evaluate.py as typed
COUNTING_RUNNER = """
import atexit, runpy, sys
from speechbias.features import cached_statistics
reads = []
original = cached_statistics.read_stacked
def counted(shas, cache, fingerprint):
    reads.append(len(shas))
    return original(shas, cache, fingerprint)
cached_statistics.read_stacked = counted
atexit.register(lambda: print(f"CACHE READS {reads}", flush=True))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A feature cache holding every clip of the two demo tests (one cold list job filled it)."""
    folder = tmp_path_factory.mktemp("pairs")
    _evaluate(folder, folder / "cache", *LISTS, f"hydra.run.dir={folder / 'cold'}")
    return folder / "cache"


def _evaluate(
    cwd: Path, cache: Path, *overrides: str, runner: list[str] | None = None, check: bool = True, fast=FAST
) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(cache))
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, *(runner or []), str(REPO / "evaluate.py"), *overrides, *fast],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_each_pair_writes_the_files_of_its_one_pair_job_bit_for_bit(cache, tmp_path):
    job = tmp_path / "job"
    _evaluate(tmp_path, cache, *LISTS, f"hydra.run.dir={job}")
    for test in TESTS:
        for aggregation in AGGREGATIONS:
            alone = tmp_path / f"{test}-{aggregation}"
            _evaluate(tmp_path, cache, f"bias_test={test}", f"aggregation={aggregation}", f"hydra.run.dir={alone}")
            assert not (alone / test).exists()  # a one-pair run keeps today's layout
            for name in PAIR_FILES:
                pair = (job / test / aggregation / name).read_bytes()
                assert pair == (alone / name).read_bytes(), f"{test}/{aggregation}/{name}"
            assert (job / test / aggregation / "report.md").is_file()
            assert (job / test / aggregation / "run_digest.json").is_file()
    # the job that filled the cache (the extraction loop, then the same pairs) computed the same numbers
    cold = cache.parent / "cold"
    for test in TESTS:
        for aggregation in AGGREGATIONS:
            a, b = (pd.read_csv(f / test / aggregation / "results.csv") for f in (cold, job))
            assert a.loc[0, "n_upstream_forwards"] > 0 and b.loc[0, "n_upstream_forwards"] == 0
            pd.testing.assert_frame_equal(a.drop(columns="n_upstream_forwards"), b.drop(columns="n_upstream_forwards"))
    table = pd.read_csv(job / "pairs.csv")
    assert list(table["pair_dir"]) == [f"{t}/{a}" for t in TESTS for a in AGGREGATIONS]
    assert len(json.loads((job / "results.json").read_text())) == 4


def test_the_job_reads_each_clip_from_the_cache_once(cache, tmp_path):
    runner = tmp_path / "count_reads.py"
    runner.write_text(COUNTING_RUNNER)
    out = _evaluate(tmp_path, cache, *LISTS, f"hydra.run.dir={tmp_path / 'job'}", runner=[str(runner)])
    reads = [line for line in out.splitlines() if line.startswith("CACHE READS")]
    clips = {p for t in TESTS for p in pd.read_csv(REPO / "experiments" / "demo" / f"{t}.csv")["path"]}
    assert reads == [f"CACHE READS [{len(clips)}]"], out[-2000:]  # one read of every clip, for 4 pairs
    assert "read once for 4 pair(s)" in out


def test_a_stopped_job_computes_only_its_missing_pairs(cache, tmp_path):
    job = tmp_path / "job"
    _evaluate(tmp_path, cache, *LISTS, f"hydra.run.dir={job}")
    before = {p: p.read_bytes() for p in job.glob("*/*/results.json")}
    finished = job / "demo_voice" / "mean_sum" / "results.json"
    finished_mtime = finished.stat().st_mtime_ns
    # the state a job stopped during its third pair leaves: no job summary, the third pair without its
    # digest (written last), the fourth not started
    for name in ("results.json", "run_digest.json", "pairs.csv"):
        (job / name).unlink()
    (job / "demo_accent" / "mean_sum" / "run_digest.json").unlink()
    for f in (job / "demo_accent" / "max_q3").iterdir():
        f.unlink()
    out = _evaluate(tmp_path, cache, *LISTS, f"hydra.run.dir={job}")
    assert "read once for 2 pair(s) (2 of 4 already finished)" in out, out[-2000:]
    assert finished.stat().st_mtime_ns == finished_mtime  # a finished pair is not written again
    assert {p: p.read_bytes() for p in job.glob("*/*/results.json")} == before
    assert (job / "results.json").is_file() and (job / "run_digest.json").is_file()
    again = _evaluate(tmp_path, cache, *LISTS, f"hydra.run.dir={job}")
    assert "results already exist" in again and "read once" not in again


def test_a_killed_job_run_again_computes_the_rest(cache, tmp_path):
    """Killed (SIGKILL) once its first pair is written, the job run again reuses the pairs it finished
    and computes the others: the files of an uninterrupted job."""
    many = ("aggregation=[mean_sum,mean_mean,mean_min,mean_max,mean_first,mean_last,max_sum,max_mean,max_max,max_q3]",)
    # each pair long enough that the kill lands mid-job
    slow = ("upstream=fbank", "logger=none", "speat.n_permutations=200000")
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(cache))
    job, whole = tmp_path / "job", tmp_path / "whole"
    command = [sys.executable, str(REPO / "evaluate.py"), LISTS[0], *many, *slow]
    proc = subprocess.Popen(
        [*command, f"hydra.run.dir={job}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    for line in proc.stdout:
        if "SpEAT demo_voice on fbank (mean_sum): d=" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=600)
    assert proc.returncode == -signal.SIGKILL
    assert not (job / "results.json").exists()
    done = sorted(p.parent.relative_to(job) for p in job.glob("*/*/run_digest.json"))
    assert 1 <= len(done) < 20, done
    out = _evaluate(tmp_path, cache, LISTS[0], *many, f"hydra.run.dir={job}", fast=slow)
    assert f"({len(done)} of 20 already finished)" in out, out[-2000:]
    _evaluate(tmp_path, cache, LISTS[0], *many, f"hydra.run.dir={whole}", fast=slow)
    pairs = sorted(p.relative_to(whole) for p in whole.glob("*/*/results.csv"))
    assert len(pairs) == 20
    for pair in pairs:
        for name in PAIR_FILES:
            assert (job / pair.parent / name).read_bytes() == (whole / pair.parent / name).read_bytes(), pair


def _table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a table the sweep has no rows for (propagation without SER runs)
        return pd.DataFrame()


def test_the_sweep_report_of_list_jobs_equals_that_of_one_pair_jobs(cache, tmp_path):
    per_pair, lists = tmp_path / "per_pair", tmp_path / "lists"
    _evaluate(
        tmp_path, cache, "-m", f"bias_test={','.join(TESTS)}", f"aggregation={','.join(AGGREGATIONS)}",
        f"hydra.sweep.dir={per_pair}",
    )  # fmt: skip
    _evaluate(tmp_path, cache, "-m", *LISTS, f"hydra.sweep.dir={lists}")
    reports = []
    for sweep in (per_pair, lists):
        _evaluate(tmp_path, cache, "task=report", f"sweep_dir={sweep}", fast=("logger=none",))  # reads no upstream
        reports.append(sweep / "report")
    names = sorted(p.name for p in reports[0].glob("*.csv"))
    assert {"results.csv", "layers.csv", "appendix_d.csv"} <= set(names)
    assert names == sorted(p.name for p in reports[1].glob("*.csv"))
    for name in names:
        a, b = (_table(r / name) for r in reports)
        folders = [c for c in ("run_dir",) if c in a.columns]
        pd.testing.assert_frame_equal(a.drop(columns=folders), b.drop(columns=folders), check_exact=True)
    results = pd.read_csv(reports[1] / "results.csv")
    assert sorted(results["overrides"].str.contains(r"\[").tolist()) == [False] * 4  # each pair's own test
    text = (reports[1] / "report.md").read_text()
    assert "1 of 1 job finished" in text and "SpEAT runs: 4" in text
    assert "4 of 4 jobs finished" in (reports[0] / "report.md").read_text()


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        (("bias_test=[demo_voice,demo_acent]",), "bias_test=demo_acent: no such option of config group bias_test; "
         "did you mean demo_accent"),
        (("aggregation=[mean_sum,max_q33]",), "aggregation=max_q33: no such option of config group aggregation; "
         "did you mean max_q3"),
    ],
)  # fmt: skip
def test_a_bad_name_in_a_list_is_one_line_and_exit_1(tmp_path, lists, expected):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), *FAST, *lists, f"paths.output_root={out}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert expected in lines[0]
    assert not out.exists()
