"""The entry points as a user runs them, from a folder outside the project and without hydra.sweep.dir:
sweeps start, end with sweep_status.csv (exit 1 when a job failed), and bad input is one line that
comes before torch, Lightning, transformers or pandas are imported."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.entry_commands import import_probe

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pytorch_lightning", "transformers", "pandas")
FAST_SPEAT = ("logger=none", "speat.n_permutations=300", "speat.per_layer=false", "upstream=fbank")
# runs an entry script like `python <script> <args>` and records which heavy modules it had imported
IMPORT_PROBE = import_probe(HEAVY)


def _env(tmp: Path) -> dict:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        WANDB_MODE="offline",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        SPEECHBIAS_CACHE=str(tmp / "cache"),
        PYTHONWARNINGS="ignore",
    )
    for key in ("HYDRA_FULL_ERROR", "PROJECT_ROOT", "SPEECHBIAS_SWEEP_ID"):
        env.pop(key, None)
    return env


def _run(repo: Path, tmp: Path, script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    cwd = tmp / "elsewhere"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(repo / script), *args],
        cwd=cwd,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_probed(repo: Path, tmp: Path, script: str, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    cwd = tmp / "elsewhere"
    cwd.mkdir(exist_ok=True)
    probe = tmp / "imported.txt"
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(repo / script), str(probe), *args],
        cwd=cwd,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, [m for m in probe.read_text().split(",") if m]


def _lines(proc) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]


def _status_rows(sweep: Path) -> list[dict]:
    return list(csv.DictReader((sweep / "sweep_status.csv").open()))


def _only_sweep(multirun_root: Path) -> Path:
    """The dated sweep folder Hydra made below multirun_root (<date>/<time>)."""
    found = [p.parent for p in multirun_root.glob("*/*/multirun.yaml")]
    assert len(found) == 1, found
    return found[0]


def test_a_bad_learning_rate_is_one_line_before_torch_is_imported(repo_root, tmp_path):
    proc, imported = _run_probed(repo_root, tmp_path, "train.py", "lr=abc")
    assert proc.returncode == 1
    assert _lines(proc) == [
        "error: lr=abc: must be a number > 0 or a list of distinct such numbers (Adam's learning rate, or a "
        "list: one head per rate, e.g. 'lr=[1e-3,1e-4,1e-5]') (HYDRA_FULL_ERROR=1 shows the traceback)"
    ]
    assert imported == []


def test_a_manifest_row_without_its_file_is_one_line_before_torch_is_imported(repo_root, tmp_path):
    manifest = tmp_path / "bad.csv"
    manifest.write_text(
        f"clip_id,path,role\na,{repo_root}/experiments/demo/demo_voice.csv,X\nb,{tmp_path}/gone.wav,Y\n"
    )
    out_root = tmp_path / "outputs"
    proc, imported = _run_probed(
        repo_root,
        tmp_path,
        "evaluate.py",
        "bias_test=demo_voice",
        f"bias_test.manifest={manifest}",
        f"paths.output_root={out_root}",
    )
    assert proc.returncode == 1 and imported == []
    (line,) = _lines(proc)
    assert line.startswith(
        f"error: bias_test.manifest={manifest}: 1 audio file(s) not found, e.g. {tmp_path}/gone.wav (row(s) 3)"
    ) and line.endswith("(HYDRA_FULL_ERROR=1 shows the traceback)")
    assert not out_root.exists(), "a run that fails its config check makes no output folder"


def test_a_report_without_its_sweep_folder_is_one_line(repo_root, tmp_path):
    proc, imported = _run_probed(repo_root, tmp_path, "evaluate.py", "task=report")
    assert proc.returncode == 1 and imported == []
    assert _lines(proc) == [
        "error: sweep_dir: required, give it on the command line, e.g. python evaluate.py "
        "task=report sweep_dir=multirun/paper_speat (HYDRA_FULL_ERROR=1 shows the traceback)"
    ]


def test_full_error_shows_the_traceback(repo_root, tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, str(repo_root / "train.py"), "lr=abc", f"paths.output_root={tmp_path / 'outputs'}"],
        cwd=cwd,
        timeout=120,
        env=dict(_env(tmp_path), HYDRA_FULL_ERROR="1"),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "ConfigError: lr=abc" in proc.stderr


def test_a_two_job_sweep_from_another_folder_writes_its_status_table(repo_root, tmp_path):
    """No hydra.sweep.dir: the sweep folder comes from paths.multirun_root (conf/paths), demo data from the project."""
    root = tmp_path / "multirun"
    proc = _run(
        repo_root,
        tmp_path,
        "evaluate.py",
        "-m",
        f"paths.multirun_root={root}",
        *FAST_SPEAT,
        "bias_test=demo_voice,demo_accent",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep = _only_sweep(root)
    rows = _status_rows(sweep)
    assert sorted(r["job"].split(",")[0] for r in rows) == ["bias_test=demo_accent", "bias_test=demo_voice"]
    assert {r["status"] for r in rows} == {"ok"} and all(float(r["seconds"]) > 0 for r in rows)
    assert all((sweep / r["job"] / "results.json").is_file() for r in rows)
    assert "2 ok of 2 job(s)" in proc.stdout
    # the same sweep again into the same folder: both jobs find their results and skip; the table keeps
    # the outcome and seconds of the run that computed them (it read "skipped, 0.0" before)
    again = _run(
        repo_root,
        tmp_path,
        "evaluate.py",
        "-m",
        f"hydra.sweep.dir={sweep}",
        *FAST_SPEAT,
        "bias_test=demo_voice,demo_accent",
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    reran = _status_rows(sweep)
    assert [(r["job"], r["status"], r["seconds"], r["error"]) for r in reran] == [
        (r["job"], "ok", r["seconds"], "") for r in rows
    ]
    assert [r["reused"] for r in reran] == ["yes", "yes"] and [r["reused"] for r in rows] == ["", ""]
    assert "2 ok (2 reused) of 2 job(s)" in again.stdout


@pytest.fixture(scope="module")
def failed_sweep(tmp_path_factory):
    """Two jobs under the joblib launcher, one of them with a manifest whose audio file is missing."""
    repo_root = REPO_ROOT
    tmp = tmp_path_factory.mktemp("failed_sweep")
    bad = tmp / "bad.csv"
    bad.write_text(f"clip_id,path,role\na,{tmp}/gone.wav,X\n")
    good = repo_root / "experiments" / "demo" / "demo_voice.csv"
    root = tmp / "multirun"
    proc = _run(
        repo_root,
        tmp,
        "evaluate.py",
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        f"paths.multirun_root={root}",
        *FAST_SPEAT,
        "bias_test=demo_voice",
        f"bias_test.manifest={good},{bad}",
        "hydra.callbacks.preflight.enabled=false",
    )  # launched anyway: one job fails
    return proc, _only_sweep(root), bad


def test_a_sweep_with_a_failed_job_exits_1_and_names_the_reason(failed_sweep):
    proc, sweep, bad = failed_sweep
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {("bad" if str(bad) in r["overrides"] else "good"): r for r in _status_rows(sweep)}
    assert rows["good"]["status"] == "ok" and rows["bad"]["status"] == "failed"
    assert rows["bad"]["error"] == (
        f"bias_test.manifest={bad}: 1 audio file(s) not found, e.g. {bad.parent}/gone.wav "
        "(row(s) 2); fix the path column or the files"
    )
    good = sweep / rows["good"]["job"]
    assert json.loads((good / "results.json").read_text())  # the other job's results are intact
    assert "Traceback" not in proc.stderr and "1 ok, 1 failed of 2 job(s)" in proc.stdout
    # the error is printed twice: the job's line (stderr) and its table row (stdout), never a third time
    assert proc.stderr.count("1 audio file(s) not found") == 1 and proc.stderr.count("job failed (") == 1
    assert proc.stdout.count("not found") == 1 and "job failed (" not in proc.stdout
    # the failed job's log keeps the full traceback
    failed_job = sweep / rows["bad"]["job"]
    assert "Traceback" in (failed_job / "evaluate.log").read_text()


def test_the_report_of_a_sweep_with_a_failed_job_names_the_reason(failed_sweep, conf_dir):
    from hydra import compose, initialize_config_dir

    from speechbias.launch.entry import run_task

    _, sweep, bad = failed_sweep
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=["task=report", f"sweep_dir={sweep}", "logger=none", f"paths.output_dir={sweep / 'report'}"],
            return_hydra_config=True,
        )
    run_task(cfg)
    md = (sweep / "report" / "report.md").read_text()
    assert "1 job folder(s) have no results yet" in md
    assert f"failed: bias_test.manifest={bad}: 1 audio file(s) not found" in md
    assert not (sweep / "report" / "figure2_propagation.png").exists() and "No Figure 2" in md


def test_train_names_bias_tests_of_its_own_config_folder(repo_root, tmp_path):
    """train.py --config-path <copy of conf/ with one more bias test>: bias_tests=[<that test>] is found
    there (checked before torch, then built), where the project's conf/ does not have it."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(repo_root / "conf", conf)
    text = (conf / "bias_test" / "demo_voice.yaml").read_text().replace("name: demo_voice", "name: my_voice")
    (conf / "bias_test" / "my_voice.yaml").write_text(text)
    out = tmp_path / "out"
    proc = _run(
        repo_root,
        tmp_path,
        "train.py",
        "--config-path",
        str(conf),
        "bias_tests=[my_voice]",
        "max_steps=2",
        "logger=none",
        f"paths.output_root={out}",
        f"paths.root_dir={repo_root}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = list(out.glob("train_ser/*/*/results.csv"))
    assert len(results) == 1 and "my_voice" in results[0].read_text()
    missing = _run(repo_root, tmp_path, "train.py", "bias_tests=[my_voice]", "logger=none", f"paths.output_root={out}")
    assert missing.returncode == 1 and "no bias test 'my_voice'" in missing.stderr
