"""RunWriter (the one writer of a run's files) and Tracker (what is logged to W&B from its record)."""

from __future__ import annotations

import json
import pickle

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from speechbias.report import tracker as tracker_module  # noqa: E402
from speechbias.report.caveat import DEMO_CAVEAT  # noqa: E402
from speechbias.report.run_writer import TRACKER_LOG, RunWriter  # noqa: E402
from speechbias.report.tracker import Tracker  # noqa: E402


def test_table_writes_csv_and_records_and_records_for_tracker(tmp_path):
    w = RunWriter(tmp_path / "run")
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    path = w.table("results", df, tracker_key="speat/results")
    assert path == tmp_path / "run" / "results.csv"
    assert pd.read_csv(path).shape == (2, 2)
    records = json.loads((tmp_path / "run" / "results.json").read_text())
    assert records == [{"a": 1, "b": 0.5}, {"a": 2, "b": None}]
    assert w.tracker_log() == [{"kind": "table", "key": "speat/results", "file": "results.csv"}]
    w.table("plain", df)  # no tracker key: not recorded
    assert len(w.tracker_log()) == 1


def _varied_frame() -> pd.DataFrame:
    """Every kind of column the runs write: float64 (NaN, inf, -0.0, tiny, huge, whole), float32, int,
    bool, strings that need quoting, object columns holding None and NaN, pandas' nullable integers."""
    return pd.DataFrame(
        {
            "d": [0.04619795383742607, np.nan, -0.0, 1e-300, 1.5e20, 10.0],
            "w": np.array([0.33337653, 0.1, 1 / 3, np.nan, 2.5, -7.0], dtype=np.float32),
            "n": np.arange(6, dtype=np.int64),
            "exact": [True, False, True, True, False, False],
            "name": ["plain", "with, comma", 'with "quotes"', "line\nbreak", "", "ünïcode"],
            "model_id": [None, "facebook/x", None, None, "a", None],
            "human_iat_d": [None, 0.5, np.nan, None, 0.25, None],
            "nullable": pd.array([1, None, 3, 4, 5, None], dtype="Int64"),
            "inf": [np.inf, -np.inf, 1.0, 2.0, 3.0, 4.0],
        }
    )


def test_table_csv_is_byte_for_byte_what_pandas_writes(tmp_path):
    frame = _varied_frame()
    path = RunWriter(tmp_path).table("t", frame)
    assert path.read_bytes() == frame.to_csv(index=False).encode()
    # the rows as dicts: the same bytes when each column's values are of one type (a one-row results table)
    row = {"upstream": "u", "model_id": None, "d": np.float64(0.04619795383742607), "n_x": 10, "exact": False,
           "human_iat_d": None, "mean_frames": 147.35, "p": 0.45454545454545453}  # fmt: skip
    RunWriter(tmp_path).table("r", [row])
    assert (tmp_path / "r.csv").read_text() == pd.DataFrame([row]).to_csv(index=False)


def test_table_json_holds_every_value_at_full_precision(tmp_path):
    frame = _varied_frame()
    RunWriter(tmp_path).table("t", frame)
    records = json.loads((tmp_path / "t.json").read_text())
    pandas_records = json.loads(frame.to_json(orient="records"))  # pandas rounds floats to 10 digits
    assert [list(r) for r in records] == [list(r) for r in pandas_records]
    for ours, theirs in zip(records, pandas_records):
        for key, value in ours.items():
            if key == "w" and value is not None:  # float32: the same float32 (pandas prints its double)
                assert np.float32(value) == np.float32(theirs[key])
            elif isinstance(value, float):
                assert value == pytest.approx(theirs[key], rel=1e-9), key
            elif key != "inf":  # pandas writes +-inf as null too
                assert value == theirs[key], key
    assert records[0]["d"] == 0.04619795383742607  # exact, not pandas' 0.0461979538
    assert records[0]["w"] == 0.33337653  # a float32 by its own shortest digits
    assert [r["inf"] for r in records[:2]] == [None, None] and records[1]["d"] is None
    assert records[0]["human_iat_d"] is None and records[2]["human_iat_d"] is None
    assert records[1]["nullable"] is None and records[0]["nullable"] == 1


def test_markdown_table_of_rows_equals_the_frames(tmp_path):
    from speechbias.report.run_writer import markdown_table

    frame = _varied_frame().drop(columns=["nullable"])
    assert markdown_table(frame) == frame.to_markdown(index=False, floatfmt=".3g")
    rows = frame.iloc[:1].to_dict("records")
    assert markdown_table(rows) == frame.iloc[:1].to_markdown(index=False, floatfmt=".3g")
    assert markdown_table([]) == markdown_table(frame.iloc[:0]) == "_(no rows)_"


def test_json_converts_numpy_and_non_finite(tmp_path):
    w = RunWriter(tmp_path)
    w.json("summary.json", {"n": np.int64(3), "x": np.float32("inf"), "v": np.arange(2), "ok": np.bool_(True)})
    assert json.loads((tmp_path / "summary.json").read_text()) == {"n": 3, "x": None, "v": [0, 1], "ok": True}


def test_report_puts_the_caveat_first_once(tmp_path):
    w = RunWriter(tmp_path, caveat=DEMO_CAVEAT)
    text = w.report("T", [("Result", "body")]).read_text()
    assert text.index(DEMO_CAVEAT) < text.index("## Result")
    assert text.count(DEMO_CAVEAT) == 1
    assert DEMO_CAVEAT not in RunWriter(tmp_path / "real").report("T", [("Result", "body")]).read_text()


def test_figure_saves_closes_and_records(tmp_path):
    w = RunWriter(tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    path = w.figure("curve", fig, tracker_key="ser/curve")
    assert path.is_file() and path.read_bytes()[:4] == b"\x89PNG"
    assert not plt.fignum_exists(fig.number)
    assert w.figure("nothing", None) is None
    assert w.tracker_log()[-1] == {"kind": "image", "key": "ser/curve", "file": "curve.png"}


def test_writer_pickles_as_its_folder(tmp_path):
    w = RunWriter(tmp_path, caveat="c")
    w.metrics({"m": 1.0})
    clone = pickle.loads(pickle.dumps(w))  # a spawned worker's copy writes into the same record
    clone.metrics({"m2": 2.0}, step=3)
    assert [e["values"] for e in w.tracker_log()] == [{"m": 1.0}, {"m2": 2.0}]
    assert w.tracker_log()[1]["step"] == 3


class FakeRun:
    def __init__(self):
        self.logged, self.summary, self.finished = [], {}, False

    def log(self, data, step=None):
        self.logged.append((data, step))

    def finish(self):
        self.finished = True


def test_tracker_logs_everything_recorded_then_finishes(tmp_path, monkeypatch):
    w = RunWriter(tmp_path / "sweep" / "job")
    w.metrics({"speat/t/d": 0.4})
    w.table("results", pd.DataFrame({"d": [0.4]}), tracker_key="speat/t/results")
    fig, _ = plt.subplots()
    w.figure("fig", fig, tracker_key="speat/t/fig")
    (w.path("fig.png")).unlink()  # a missing file is warned about, not fatal
    started = {}
    run = FakeRun()

    def start_run(**kwargs):
        started.update(kwargs)
        return run

    monkeypatch.setattr(tracker_module.wandb_run, "start_run", start_run)
    seen = []
    Tracker("wandb", tags=["extra"]).publish(
        w, job_type="speat", name="n", tags=["t"], config={"a": 1}, on_run=seen.append
    )
    assert started["group"] == "sweep" and started["tags"] == ["t", "extra"] and started["config"] == {"a": 1}
    assert run.summary == {"speat/t/d": 0.4}
    keys = [k for data, _ in run.logged for k in data]
    assert keys == ["speat/t/d", "speat/t/results"]
    assert seen == [run] and run.finished


@pytest.mark.parametrize("kind", ["none", "csv"])
def test_other_trackers_log_nothing(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(tracker_module.wandb_run, "start_run", lambda **kw: pytest.fail("W&B started"))
    w = RunWriter(tmp_path)
    w.metrics({"x": 1})
    Tracker(kind).publish(w, job_type="j", name="n")
    assert (Tracker("csv").lightning_logger(tmp_path) != {}) and Tracker(kind="none").lightning_logger(tmp_path) == {}
    assert (tmp_path / TRACKER_LOG).is_file()


def test_unknown_tracker_kind_is_an_error():
    with pytest.raises(ValueError, match="logger.kind"):
        Tracker("tensorboard")


def test_a_new_writer_starts_a_new_record_but_not_in_launched_workers(tmp_path, monkeypatch):
    RunWriter(tmp_path).metrics({"old": 1})
    monkeypatch.setenv("LOCAL_RANK", "1")  # a DDP worker's own writer keeps the run's record
    assert RunWriter(tmp_path).tracker_log() == [{"kind": "metrics", "values": {"old": 1}, "step": None}]
    monkeypatch.delenv("LOCAL_RANK")
    assert RunWriter(tmp_path).tracker_log() == []  # force=true rerun into the same folder


def test_an_empty_table_is_not_logged(tmp_path, monkeypatch):
    w = RunWriter(tmp_path)
    w.table("results", pd.DataFrame(), tracker_key="report/results")
    run = FakeRun()
    monkeypatch.setattr(tracker_module.wandb_run, "start_run", lambda **kw: run)
    Tracker("wandb").publish(w, job_type="report", name="n")
    assert run.logged == [] and run.finished


def test_tables_reach_the_tracker_with_their_types(tmp_path, monkeypatch):
    w = RunWriter(tmp_path)
    w.table("t", pd.DataFrame({"shown": ["0.0", "12.5"], "x": [1.5, np.nan]}), tracker_key="k")
    got = {}
    monkeypatch.setattr(tracker_module.wandb_run, "start_run", lambda **kw: FakeRun())
    monkeypatch.setattr(tracker_module.wandb_run, "log_table", lambda run, key, df: got.setdefault(key, df))
    Tracker("wandb").publish(w, job_type="j", name="n")
    assert list(got["k"]["shown"]) == ["0.0", "12.5"]  # formatted strings stay strings (a CSV would parse them)
    assert got["k"]["x"].iloc[0] == 1.5 and np.isnan(got["k"]["x"].iloc[1])


def test_a_record_line_cut_short_by_a_killed_run_is_skipped(tmp_path):
    w = RunWriter(tmp_path)
    w.metrics({"a": 1})
    with open(tmp_path / TRACKER_LOG, "a", encoding="utf-8") as f:
        f.write('{"kind": "metrics", "val')  # the process died mid-line
    assert w.tracker_log() == [{"kind": "metrics", "values": {"a": 1}, "step": None}]


@pytest.mark.parametrize(
    ("env", "launching"),
    [
        ({}, True),
        ({"LOCAL_RANK": "1"}, False),
        ({"RANK": "0", "LOCAL_RANK": "0"}, True),
        ({"SLURM_PROCID": "2"}, False),
        ({"SLURM_PROCID": "0"}, True),
        (
            {"LOCAL_RANK": "0", "SLURM_PROCID": "3"},
            True,
        ),  # SLURM allocation, Lightning's own processes: LOCAL_RANK decides
        ({"JSM_NAMESPACE_RANK": "1"}, False),
    ],
)
def test_launching_process_reads_the_rank_as_lightning_does(monkeypatch, env, launching):
    from speechbias.report.run_writer import RANK_VARIABLES, launching_process

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert launching_process() is launching
    from lightning_fabric.utilities.rank_zero import _get_rank  # Lightning's own reading of the same variables

    assert ((_get_rank() or 0) == 0) is launching


@pytest.mark.parametrize("name", ["../escape.csv", "sub/inner.csv", "/abs/path.png", "..", ".", "", "a\\b.csv"])
def test_no_file_name_leaves_the_run_folder(tmp_path, name):
    """A test named e.g. '../../x' must never make a figure or table land outside the run folder."""
    writer = RunWriter(tmp_path / "run")
    with pytest.raises(ValueError, match="not a plain file name"):
        writer.text(name, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] or not (tmp_path / "run").exists()
    assert not (tmp_path / "escape.csv").exists()


def test_figure_of_a_test_with_a_path_in_its_name_is_refused(tmp_path):
    writer = RunWriter(tmp_path / "run")
    with pytest.raises(ValueError, match="not a plain file name"):
        writer.figure("propagation_x/../../../evil", plt.figure())
    assert not list(tmp_path.rglob("evil*"))
