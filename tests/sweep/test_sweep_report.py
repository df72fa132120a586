"""The report folder: every table and figure, report.md embedding them, W&B logging, determinism;
the report task as conf/task/report.yaml builds it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from PIL import Image

from speechbias.report import sweep_tables, wandb_report, wandb_run
from speechbias.report.caveat import DEMO_CAVEAT, markdown_caveat
from speechbias.report.run_writer import RunWriter
from speechbias.report.tracker import Tracker
from speechbias.launch.entry import build_task
from speechbias.tasks.report import ReportTask
from speechbias.tasks.report_checks import ReportFolders
from speechbias.errors import ConfigError
from sweep.fake_sweep import PAPER_MODELS, write_propagation_sweep, write_speat_sweep

REPO = Path(__file__).resolve().parents[2]

FIGURES = [
    "figure1_effect_sizes",
    "figure2_propagation",
    "figure3_se_curves",
    "appendix_d_positive",
    "layer_profiles",
    "significance_heatmap",
]


class FakeRun:
    """Records what the report logs (the parts of a wandb run that wandb_run uses)."""

    def __init__(self):
        self.logged: dict = {}
        self.summary: dict = {}
        self.started: dict = {}

    def log(self, data, step=None):
        self.logged.update(data)

    def finish(self):
        pass


def _report(sweep, out, tracker: Tracker | None = None) -> dict:
    """The report task on ``sweep`` writing into ``out``; its summary metrics."""
    folders = ReportFolders(sweep_dir=str(sweep))
    return ReportTask(folders=folders, writer=RunWriter(out), tracker=tracker or Tracker("none")).run()


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "s"
    write_speat_sweep(root, models=PAPER_MODELS[::5], aggregations=("mean_sum", "max_q3"))
    write_propagation_sweep(root, models=PAPER_MODELS[::5][:3], tests=("female_male", "young_old"))
    (root / "aggregation=mean_sum,bias_test=young_old,upstream=x" / ".hydra").mkdir(parents=True)
    return root


def test_report_writes_every_table_and_figure_embeds_them_and_is_reproducible(sweep, monkeypatch):
    run = FakeRun()
    monkeypatch.setattr(wandb_run, "start_run", lambda **kw: run.started.update(kw) or run)
    summary = _report(sweep, sweep / "report", Tracker("wandb"))
    out = sweep / "report"
    for name in FIGURES:
        with Image.open(out / f"{name}.png") as im:
            assert im.size[0] > 600 and im.size[1] > 300
    results = pd.read_csv(out / "results.csv")
    assert len(results) == len(PAPER_MODELS[::5]) * 6 * 2
    assert {"d", "p", "n_x", "p_bonferroni", "p_holm", "significant_bonferroni", "significance"} <= set(results.columns)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), results, check_dtype=False)
    md = (out / "report.md").read_text()
    embedded = set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md))
    assert embedded == {f"{n}.png" for n in FIGURES}
    for table in ("appendix_d", "anova", "congruence", "propagation", "propagation_agreement", "layers", "se_curves"):
        assert (out / f"{table}.csv").is_file(), table
    assert "signs agree" not in md or "pooled" in md
    assert "1e-3" in (out / "propagation_agreement.csv").read_text()
    # W&B summary run: tables and figures
    assert {"report/results", "report/appendix_d", "report/propagation"} <= set(run.logged)
    assert {f"report/{n}" for n in FIGURES} <= set(run.logged)
    assert run.summary["report/n_speat_runs"] == len(results) == summary["report/n_speat_runs"]
    assert run.started["job_type"] == "report" and run.started["name"] == "report/s" and run.started["group"] == "s"
    assert "1 job folder(s) have no results yet" in md and "upstream=x" in md
    # the completion count heads report.md and is in the W&B summary: SpEAT runs + 3 models x 3 SER heads
    n_finished = len(results) + 9
    assert (
        md.splitlines()[0]
        == f"# SpEAT sweep report: {n_finished} of {n_finished + 1} jobs finished (1 failed or unfinished)"
    )
    assert (run.summary["report/n_finished"], run.summary["report/n_jobs"]) == (n_finished, n_finished + 1)
    # the same runs give the same report (the first report folder is not read as a run)
    again = sweep / "again"
    _report(sweep, again)
    for name in ("results.csv", "appendix_d.csv", "propagation.csv", "congruence.csv", "report.md"):
        assert (again / name).read_text() == (out / name).read_text(), name


def test_report_of_a_sweep_without_job_folders_fails_and_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="no job folders.*multirun/paper_speat"):
        _report(tmp_path, tmp_path / "report")
    assert not (tmp_path / "report" / "report.md").exists()


def test_report_of_a_sweep_where_no_job_finished_draws_no_figure_says_why_and_fails(tmp_path):
    (tmp_path / "upstream=x" / ".hydra").mkdir(parents=True)
    with pytest.raises(ConfigError, match="0 of 1 job finished"):
        _report(tmp_path, tmp_path / "report")
    images = [e for e in RunWriter(tmp_path / "report").tracker_log() if e["kind"] == "image"]
    assert images == [] and not list((tmp_path / "report").glob("*.png"))
    md = (tmp_path / "report" / "report.md").read_text()
    assert not re.findall(r"!\[[^\]]*\]\(", md)
    for line in (
        "_No Figure 1: no SpEAT results in this sweep._",
        "_No significance heat map: no SpEAT results",
        "_No Figure 2: no SER propagation runs",
        "_No Figure 3: no SE curves",
        "_No layer-profile figure: no per-layer results",
        "_No appendix D figure: no SpEAT results",
    ):
        assert line in md, line


def test_report_names_the_reason_of_each_incomplete_job(tmp_path):
    from speechbias.launch.sweep_status import JobStatus

    sweep = tmp_path / "s"
    write_speat_sweep(sweep, models=PAPER_MODELS[:2], tests={"female_male": 0.31})
    failed = sweep / "bias_test=female_male,upstream=broken"
    (failed / ".hydra").mkdir(parents=True)
    JobStatus("failed", ["upstream=broken"], 0.4, error="bias_test.manifest=/x.csv: no such file").write(failed)
    killed = sweep / "bias_test=female_male,upstream=killed"
    (killed / ".hydra").mkdir(parents=True)
    JobStatus("running", ["upstream=killed"]).write(killed)
    logged = sweep / "bias_test=female_male,upstream=old"
    (logged / ".hydra").mkdir(parents=True)
    (logged / "evaluate.log").write_text("[INFO] - start\n[ERROR] - AudioError: /a.wav: not a WAV file\n[INFO] - x\n")
    silent = sweep / "bias_test=female_male,upstream=silent"
    (silent / ".hydra").mkdir(parents=True)
    _report(sweep, sweep / "report")
    md = (sweep / "report" / "report.md").read_text()
    assert "4 job folder(s) have no results yet" in md
    assert "`bias_test=female_male,upstream=broken`: failed: bias_test.manifest=/x.csv: no such file" in md
    assert "`bias_test=female_male,upstream=killed`: no end recorded (the job was killed" in md
    # text from the folder is escaped markdown: its brackets cannot open a link (renders as "[ERROR]")
    assert (
        "`bias_test=female_male,upstream=old`: failed (from its log): \\[ERROR\\] - AudioError: /a.wav: not a WAV" in md
    )
    assert "`bias_test=female_male,upstream=silent`: no status or error recorded" in md


def _png_height(path) -> int:
    with Image.open(path) as im:
        return im.size[1]


def test_figures_of_a_sweep_with_demo_tests_carry_the_demo_caveat(tmp_path):
    """The same results under a demo test name and a paper test name: the demo figures are taller by the
    caveat's strip (and report.md carries the synthetic note); the paper ones have neither."""
    for name in ("demo_voice", "female_male"):
        write_speat_sweep(tmp_path / name, models=PAPER_MODELS[:3], tests={name: None})
        _report(tmp_path / name, tmp_path / name / "report")
    demo, paper = tmp_path / "demo_voice" / "report", tmp_path / "female_male" / "report"
    for fig in ("figure1_effect_sizes", "significance_heatmap", "figure3_se_curves", "layer_profiles"):
        assert _png_height(demo / f"{fig}.png") > _png_height(paper / f"{fig}.png") + 20, fig
    demo_md, paper_md = (demo / "report.md").read_text(), (paper / "report.md").read_text()
    # the caveat is said once (it was said twice: "Demo run" and a "Note" in other words)
    assert demo_md.count("not findings about any model or group") == 1 and "## Note" not in demo_md
    assert markdown_caveat(DEMO_CAVEAT) in demo_md and "not findings" not in paper_md


def test_a_sweep_mixing_demo_and_paper_tests_names_the_demo_tests_in_its_caveat(tmp_path):
    write_speat_sweep(tmp_path, models=PAPER_MODELS[:3], tests={"demo_voice": None, "female_male": 0.31})
    _report(tmp_path, tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.count("not findings about any model or group") == 1
    assert "DEMO TESTS (demo_voice): synthetic stimuli" in md and DEMO_CAVEAT not in md
    assert "- SpEAT runs: 6 (3 models, 2 tests, 1 aggregation); SER runs: 0" in md  # was "1 aggregations"


def test_a_sweep_whose_jobs_all_failed_exits_1_with_one_line_after_writing_its_report(tmp_path):
    """What the user types: python evaluate.py task=report sweep_dir=<a sweep whose 3 jobs failed>."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from speechbias.launch.sweep_status import JobStatus

    sweep = tmp_path / "s"
    for k in range(3):
        job = sweep / f"bias_test=female_male,upstream=m{k}"
        (job / ".hydra").mkdir(parents=True)
        JobStatus("failed", [f"upstream=m{k}"], 0.1, error=f"cannot load the model of 'm{k}'").write(job)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(repo / "evaluate.py"), "task=report", f"sweep_dir={sweep}", "logger=none"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "0 of 3 jobs finished (3 failed or unfinished)" in errors[0]
    assert "first error: failed: cannot load the model of 'm0'" in errors[0] and "Traceback" not in proc.stderr
    md = (sweep / "report" / "report.md").read_text()
    assert md.splitlines()[0] == "# SpEAT sweep report: 0 of 3 jobs finished (3 failed or unfinished)"
    assert "`bias_test=female_male,upstream=m2`: failed: cannot load the model of 'm2'" in md


def test_d_pivot_marks_significance():
    main = pd.DataFrame(
        {
            "upstream": ["a", "a", "b", "b"],
            "family": "hubert",
            "test": ["t1", "t2", "t1", "t2"],
            "d": [0.5, -0.2, 1.2, 0.1],
            "significance": ["uncorrected", "none", "corrected", "none"],
            "human_iat_d": [0.3, None, 0.3, None],
        }
    )
    pivot = sweep_tables.d_pivot(main).set_index("model")
    assert pivot.loc["a", "t1"] == "+0.50*" and pivot.loc["b", "t1"] == "+1.20**" and pivot.loc["a", "t2"] == "-0.20"
    assert pivot.loc["mean over models", "t1"] == "+0.85" and pivot.loc["human IAT D", "t1"] == "+0.30"


def test_wandb_report_is_built_from_the_summary_run_and_skipped_offline():
    pytest.importorskip("wandb_workspaces")
    report = wandb_report.build_report(
        "speechbias",
        "me",
        "sweep-1",
        "title",
        "desc",
        ["report/figure1_effect_sizes"],
        ["report/results"],
        [("Sweep", "- 6 runs")],
    )
    assert report.title == "title" and len(report.blocks) == 5

    class OfflineRun:
        settings = type("S", (), {"mode": "offline", "_offline": True})()

    assert wandb_report.create_report(OfflineRun(), "g", "t", "d", [], []) is None
    assert wandb_report.create_report(None, "g", "t", "d", [], []) is None


def test_the_report_config_builds_the_task_with_its_collaborators(conf_dir, tmp_path, monkeypatch):
    """conf/task/report.yaml: writer, tracker and settings are built (nested _target_ nodes, lists as
    tuples, mappings as dicts); a relative sweep_dir is found in the working directory."""
    write_speat_sweep(tmp_path / "sweep", models=PAPER_MODELS[:2], tests={"female_male": 0.31})
    monkeypatch.chdir(tmp_path)
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[
                "task=report",
                "sweep_dir=sweep",
                "logger=none",
                "task.alpha=0.01",
                "task.corrections=[holm]",
                f"paths.output_dir={tmp_path / 'out'}",
            ],
            return_hydra_config=True,
        )
    task = build_task(cfg)
    assert isinstance(task, ReportTask) and task.sweep_dirs == [tmp_path / "sweep"] and task.paper_results is None
    assert isinstance(task.writer, RunWriter) and task.writer.output_dir == tmp_path / "out"
    assert isinstance(task.tracker, Tracker) and task.tracker.kind == "none"
    settings = task.settings
    assert (settings.alpha, settings.corrections, settings.title) == (0.01, ("holm",), "SpEAT sweep report")
    assert (settings.main_aggregation, settings.paper_equivalent_aggregations) == (
        "mean_sum",
        ("mean_mean", "mean_sum"),
    )
    assert settings.paper_tests["TORGO Recordings"] == "abled_disabled" and type(settings.paper_models) is dict
    summary = task.run(config={})
    assert summary["report/n_speat_runs"] == 2 and summary["report/human_total"] == 2
    assert "p_holm" in pd.read_csv(tmp_path / "out" / "results.csv").columns


def _report_imports(sweep, tmp_path) -> set[str]:
    """The top-level modules ``python -X importtime evaluate.py task=report sweep_dir=<sweep> logger=none``
    imports, as the user types it (it must exit 0)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(REPO / "evaluate.py"),
            "task=report",
            f"sweep_dir={sweep}",
            "logger=none",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {m.split(".")[0] for m in re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.M)}


def test_the_report_command_imports_no_torch(sweep, tmp_path):
    """What the user types: python evaluate.py task=report sweep_dir=<sweep>; its seeding leaves torch alone
    (the report draws nothing from torch's generator) and nothing else imports it (``-X importtime``)."""
    imported = _report_imports(sweep, tmp_path)
    assert "pandas" in imported  # the import record sees what the report imports
    assert "torch" not in imported
    assert (sweep / "report" / "report.md").is_file()


def test_the_report_of_a_speat_only_sweep_imports_no_scipy_or_statsmodels(tmp_path):
    """Without SER runs (Cohen's d and its CI) or an ANOVA to fit (one model), the report needs neither scipy
    nor statsmodels (~1 CPU-s of imports): what the user types, read from ``-X importtime``."""
    sweep = tmp_path / "s"
    write_speat_sweep(sweep, models=PAPER_MODELS[:1], aggregations=("mean_sum", "max_q3"), se_curve=False)
    imported = _report_imports(sweep, tmp_path)
    assert {"pandas", "matplotlib"} <= imported  # the import record sees what the report imports
    assert not imported & {"scipy", "statsmodels", "torch"}
    assert "figure1_effect_sizes.png" in (sweep / "report" / "report.md").read_text()
