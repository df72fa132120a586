"""Real sweeps through ``python evaluate.py -m`` with the joblib launcher, then the sweep report;
an interrupted sweep resumed into the same folder gives the same report and recomputes nothing
that had finished; ``force=true`` recomputes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.launch.entry import run_task

# a SpEAT-only sweep has no Figure 2 (SER propagation), one aggregation no appendix D heat map (one cell),
# and one-layer upstreams only no layer profiles: the report says why instead of drawing them
FIGURES = ["figure1_effect_sizes", "figure3_se_curves", "significance_heatmap"]


def _env(cache: Path) -> dict:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        WANDB_MODE="offline",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        SPEECHBIAS_CACHE=str(cache),
        PYTHONWARNINGS="ignore",
    )
    return env


def _sweep_command(repo: Path, sweep: Path, upstreams: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        str(repo / "evaluate.py"),
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}",
        "logger=none",
        "speat.n_permutations=300",
        "speat.se_curve=true",
        "speat.n_resamples=50",
        "bias_test=demo_voice,demo_accent",
        f"upstream={upstreams}",
        *extra,
    ]


def _run(cmd, repo, env, timeout=600):
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _report_in_process(conf_dir: Path, sweep: Path) -> Path:
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=["task=report", f"sweep_dir={sweep}", "logger=none", f"paths.output_dir={sweep / 'report'}"],
            return_hydra_config=True,
        )
    run_task(cfg)
    return sweep / "report"


def _results_mtimes(sweep: Path) -> dict[str, int]:
    """results.json of the finished jobs: those whose run digest (written when a job completes) is there."""
    return {
        p.parent.name: p.stat().st_mtime_ns
        for p in sweep.glob("*/results.json")
        if p.parent.name != "report" and (p.parent / "run_digest.json").is_file()
    }


def _check_report(report: Path, n_runs: int, layer_profiles: bool = True) -> pd.DataFrame:
    for name in FIGURES + (["layer_profiles"] if layer_profiles else []):
        assert (report / f"{name}.png").stat().st_size > 5000, name
    assert (report / "layer_profiles.png").exists() == layer_profiles and not (
        report / "appendix_d_positive.png"
    ).exists()
    results = pd.read_csv(report / "results.csv")
    assert len(results) == n_runs and results["d"].notna().all()
    assert (report / "results.parquet").is_file() and (report / "report.md").is_file()
    assert not (report / "figure2_propagation.png").exists()
    md = (report / "report.md").read_text()
    assert "no results yet" not in md and "no SE curves" not in md and "No Figure 2: no SER propagation runs" in md
    assert "_No appendix D figure: one aggregation strategy in this sweep (mean_sum: d > 0 in" in md
    assert md.splitlines()[0] == f"# SpEAT sweep report: {n_runs} of {n_runs} jobs finished"
    return results


def test_parallel_sweep_then_report(repo_root, conf_dir, tmp_path):
    """Default-suite sweep: 2 weight-free upstreams x 2 demo tests in 2 parallel jobs, then the report."""
    sweep = tmp_path / "sweep"
    _run(_sweep_command(repo_root, sweep, "fbank,mfcc"), repo_root, _env(tmp_path / "cache"))
    jobs = sorted(p.name.lower() for p in sweep.iterdir() if p.is_dir())
    assert jobs == sorted(
        f"bias_test={t},speat.n_permutations=300,speat.n_resamples=50,speat.se_curve=true,upstream={u}"
        for t in ("demo_accent", "demo_voice")
        for u in ("fbank", "mfcc")
    )
    results = _check_report(_report_in_process(conf_dir, sweep), 4, layer_profiles=False)  # fbank, mfcc: one layer
    assert set(results["test"]) == {"demo_voice", "demo_accent"} and results["upstream"].nunique() == 2
    se = pd.read_csv(sweep / "report" / "se_curves.csv")
    assert se.groupby("run_dir").ngroups == 4


def _strip_paths(text: str, sweep: Path) -> str:
    return text.replace(str(sweep), "<sweep>")


@pytest.mark.slow
def test_killed_and_resumed_sweep_gives_the_same_report(repo_root, tmp_path):
    """3 tiny upstreams x 2 demo tests: uninterrupted vs. killed after two jobs and resumed."""
    upstreams = "tiny_wav2vec2,tiny_hubert,fbank"
    env = _env(tmp_path / "cache")
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    _run(_sweep_command(repo_root, full, upstreams), repo_root, env)
    _run([sys.executable, "evaluate.py", "task=report", f"sweep_dir={full}", "logger=none"], repo_root, env)
    reference = _check_report(full / "report", 6)

    # interrupted: kill the whole sweep (launcher and workers) once two jobs have finished
    proc = subprocess.Popen(
        _sweep_command(repo_root, resumed, upstreams),
        cwd=repo_root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 600
    while len(list(resumed.glob("*/run_digest.json"))) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = _results_mtimes(resumed)
    assert 2 <= len(finished) < 6, "the sweep should have been interrupted part-way"

    out = _run(_sweep_command(repo_root, resumed, upstreams), repo_root, env)
    after = _results_mtimes(resumed)
    assert len(after) == 6
    assert all(after[k] == v for k, v in finished.items()), "a finished job was recomputed"
    assert len(re.findall("results already exist", out.stdout + out.stderr)) >= len(finished)
    _run([sys.executable, "evaluate.py", "task=report", f"sweep_dir={resumed}", "logger=none"], repo_root, env)
    again = _check_report(resumed / "report", 6)
    provenance = ["n_upstream_forwards"]  # how a run got its features (cold or warm cache), not a result
    pd.testing.assert_frame_equal(
        again.drop(columns=provenance, errors="ignore"), reference.drop(columns=provenance, errors="ignore")
    )
    for name in ("report.md", "appendix_d.csv", "layers.csv", "se_curves.csv", "anova.csv"):
        assert _strip_paths((resumed / "report" / name).read_text(), resumed) == _strip_paths(
            (full / "report" / name).read_text(), full
        ), name

    # force=true recomputes (same job folders: force is not part of a folder's name)
    _run(_sweep_command(repo_root, resumed, "fbank", ("force=true",)), repo_root, env)
    forced = _results_mtimes(resumed)
    for job, mtime in after.items():
        assert (forced[job] > mtime) == job.endswith("upstream=fbank"), job


def test_a_sweep_whose_error_holds_markup_prints_its_table_and_exits_1(tmp_path):
    """The issue's command: both jobs fail on a manifest path with ``[/x]`` in it (rich markup that
    closes no tag); the table shows the path as typed and the sweep exits 1 (it printed no table
    and exited 0)."""
    repo = Path(__file__).resolve().parents[2]
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            "-m",
            "upstream=fbank,mfcc",
            f"hydra.sweep.dir={sweep}",
            "logger=none",
            "bias_test.manifest='/tmp/[/x]/m.csv'",
            "hydra.callbacks.preflight.enabled=false",
        ],  # launched anyway: the jobs fail
        cwd=repo,
        env=_env(tmp_path / "cache"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout.replace("\n", "")
    assert "2 failed of 2 job(s)" in out and "/tmp/[/x]/m.csv" in out
    rows = pd.read_csv(sweep / "sweep_status.csv")
    assert list(rows["status"]) == ["failed", "failed"]
    assert all("/tmp/[/x]/m.csv" in e and "\n" not in e for e in rows["error"])


@pytest.mark.slow
def test_two_parallel_sweeps_started_at_once_get_their_own_folders_and_tables(repo_root, tmp_path):
    """No hydra.sweep.dir: the default ``<time>-<microseconds>-<process id>`` folder. Each sweep's joblib
    workers write below their own sweep's folder (the process id is the one of the process that composed
    the config, not the worker's), so each table lists its two jobs (it was empty: 0 job(s))."""
    root = tmp_path / "multirun"
    cmd = [
        sys.executable,
        str(repo_root / "evaluate.py"),
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        f"paths.multirun_root={root}",
        "logger=none",
        "speat.n_permutations=300",
        "speat.per_layer=false",
        "upstream=fbank,mfcc",
    ]
    env = _env(tmp_path / "cache")
    procs = [
        subprocess.Popen(cmd, cwd=repo_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    sweeps = sorted(p for p in root.glob("*/*") if p.is_dir())
    assert len(sweeps) == 2, sweeps
    for sweep, out in zip(sweeps, sorted(outs, key=lambda o: o.rsplit("of 2 job(s); ", 1)[-1])):
        assert re.fullmatch(r"\d\d-\d\d-\d\d-\d{6}-\d+", sweep.name), sweep.name
        rows = pd.read_csv(sweep / "sweep_status.csv")
        assert sorted(rows["job"].str.rsplit("=", n=1).str[-1]) == ["fbank", "mfcc"]
        assert list(rows["status"]) == ["ok", "ok"]
        assert f"2 ok of 2 job(s); {sweep / 'sweep_status.csv'}" in out.replace("\n", "")
