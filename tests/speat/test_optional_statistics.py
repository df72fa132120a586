"""An optional statistic is one entry of ``OPTIONAL_STATISTICS``: registered there (here a test-local one,
patched into the table), it is computed and written as its table, with its report.md section, tracker key
and result column, exactly when its flag is true, through ``SpeatResults`` and a real ``RunWriter``."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass

import numpy as np
import pytest

from speechbias.aggregation import Aggregation
from speechbias.checked_settings import ACCEPTS, boolean, setting, setting_fields
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.speat import optional_statistics
from speechbias.speat.optional_statistics import OptionalStatistic, PairInputs, StatisticRows
from speechbias.speat.results import SpeatResults
from speechbias.speat.settings import SpeatSettings
from speechbias.stimuli.bias_test import BiasTest
from speechbias.stimuli.manifest import ManifestError

ROLES = ["X"] * 4 + ["Y"] * 4 + ["A"] * 4 + ["B"] * 4


@dataclass
class ToySettings(SpeatSettings):
    role_means: bool = setting(boolean(), False, "each role's mean embedding value")


def _role_means(inputs: PairInputs) -> StatisticRows:
    """Each role's mean of its aggregated embeddings' values, and the A minus B gap as a result column."""
    means = {r: float(inputs.embeddings[inputs.roles == r].mean()) for r in ("X", "Y", "A", "B")}
    return StatisticRows([{"role": r, "mean": m} for r, m in means.items()], {"a_minus_b": means["A"] - means["B"]})


TOY = OptionalStatistic(
    flag="role_means",
    table="role_means",
    compute=_role_means,
    section=lambda row, rows, convention: ("Mean by role", markdown_table(rows)),
    tracker_key="speat/{test}/role_means",
    absent_note="Means by role: not computed (speat.role_means=true).",
)


@pytest.fixture
def statistics() -> StackedStatistics:
    rng = np.random.default_rng(3)
    n, layers, dim = len(ROLES), 3, 4
    return StackedStatistics(
        mean=rng.normal(size=(n, layers, dim)).astype(np.float32),
        min=rng.normal(size=(n, layers, dim)).astype(np.float32),
        max=rng.normal(size=(n, layers, dim)).astype(np.float32),
        n_frames=np.full(n, 10),
        audio_sha=[f"sha{i}" for i in range(n)],
    )


def _run(tmp_path, statistics, monkeypatch, **flags):
    monkeypatch.setattr(optional_statistics, "OPTIONAL_STATISTICS", (*optional_statistics.OPTIONAL_STATISTICS, TOY))
    test = BiasTest(name="toy_test", manifest="toy.csv", x_label="group x", y_label="group y")
    settings = ToySettings(n_permutations=100, per_layer=False, se_curve=False, **flags)
    manifest = {"clip_id": [f"c{i}" for i in range(len(ROLES))], "role": ROLES}
    writer = RunWriter(tmp_path)
    run_info = {"family": "toy", "upstream": "toy_model"}
    row = SpeatResults(test, manifest, Aggregation("mean", "sum"), writer, run_info, settings, seed=0).compute(
        statistics
    )
    return row, writer, (tmp_path / "report.md").read_text(encoding="utf-8")


def test_a_registered_statistic_is_computed_and_written_when_its_flag_is_true(tmp_path, statistics, monkeypatch):
    row, writer, report = _run(tmp_path, statistics, monkeypatch, role_means=True)
    # mean_sum by hand: each clip's temporal means summed over layers, then each role's mean of the values
    summed = statistics.mean.astype(np.float64).sum(axis=1)
    roles = np.array(ROLES)
    expected = {r: summed[roles == r].mean() for r in ("X", "Y", "A", "B")}
    with open(tmp_path / "role_means.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [list(r)[:2] for r in rows] == [["upstream", "test"]] * 4  # the result row's identity first
    assert [(r["upstream"], r["test"], r["role"]) for r in rows] == [("toy_model", "toy_test", r) for r in expected]
    assert [float(r["mean"]) for r in rows] == pytest.approx(list(expected.values()), rel=1e-12)
    assert len(json.loads((tmp_path / "role_means.json").read_text())) == 4
    assert row["a_minus_b"] == pytest.approx(expected["A"] - expected["B"], rel=1e-12)
    with open(tmp_path / "results.csv", newline="", encoding="utf-8") as f:
        (result,) = csv.DictReader(f)
    assert float(result["a_minus_b"]) == pytest.approx(expected["A"] - expected["B"], rel=1e-12)
    assert "## Mean by role" in report and "not computed (speat.role_means=true)" not in report
    keys = [e.get("key") for e in writer.tracker_log()]
    assert "speat/toy_test/role_means" in keys and keys.index("speat/toy_test/role_means") < keys.index(
        "speat/toy_test/results"
    )


def test_a_registered_statistic_is_absent_when_its_flag_is_false(tmp_path, statistics, monkeypatch):
    row, writer, report = _run(tmp_path, statistics, monkeypatch, role_means=False)
    assert not (tmp_path / "role_means.csv").exists() and not (tmp_path / "role_means.json").exists()
    assert "a_minus_b" not in row and (tmp_path / "results.csv").is_file()
    assert "## Mean by role" not in report and "Means by role: not computed (speat.role_means=true)." in report
    assert "speat/toy_test/role_means" not in [e.get("key") for e in writer.tracker_log()]
    # the shipped statistics, off here, are absent too
    assert not (tmp_path / "layers.csv").exists() and not (tmp_path / "se_curve.csv").exists()


def test_every_entry_names_a_boolean_flag_of_the_settings_and_a_table_of_its_own():
    flags = {f.name: f for f in setting_fields(SpeatSettings)}
    tables = [s.table for s in optional_statistics.OPTIONAL_STATISTICS]
    for statistic in optional_statistics.OPTIONAL_STATISTICS:
        assert statistic.flag in flags and flags[statistic.flag].metadata[ACCEPTS].kind == "bool", statistic.flag
    assert len(set(tables)) == len(tables) and "results" not in tables


def test_a_flagged_statistics_check_refuses_the_manifest_before_anything_is_written(tmp_path, statistics):
    """The SE curve's entry checks a manifest built during the run (not checked before it) first: a stratified
    design with no stratum column values is named, and the run folder stays empty."""
    test = BiasTest(name="toy_test", manifest="toy.csv", x_label="x", y_label="y", resampling="stratified")
    manifest = {"clip_id": [f"c{i}" for i in range(len(ROLES))], "role": ROLES, "stratum": [""] * len(ROLES)}
    settings = SpeatSettings(n_permutations=100, per_layer=True, se_curve=True, n_resamples=10)
    results = SpeatResults(test, manifest, Aggregation("mean", "sum"), RunWriter(tmp_path), {"upstream": "u"}, settings)
    with pytest.raises(ManifestError, match="resamples the SE curve by stratum, but 8 of 8 target clips have none"):
        results.compute(statistics)
    assert list(tmp_path.iterdir()) == []
    settings.se_curve = False  # the same manifest without the SE curve: no check, the run is written
    SpeatResults(test, manifest, Aggregation("mean", "sum"), RunWriter(tmp_path), {"upstream": "u"}, settings).compute(
        statistics
    )
    assert (tmp_path / "results.json").is_file() and (tmp_path / "layers.csv").is_file()
