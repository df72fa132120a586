"""The sweep's W&B comparison report, built and serialised without a server: the report objects of
wandb-workspaces convert into the report spec that ``Report.save()`` would send (pydantic-validated), and
that spec holds what the sweep report asks for. Without an entity no project lookup is made, so no
network or account is needed. wandb-workspaces has no public serialiser: ``_to_model()`` is what its
``save()`` serialises."""

from __future__ import annotations

import json

import pytest

from speechbias.report import wandb_report


def test_the_sweep_report_serialises_to_a_valid_spec_with_its_runs_figures_tables_and_sections():
    pytest.importorskip("wandb_workspaces")
    report = wandb_report.build_report(
        "speechbias",
        None,
        "sweep-1",
        "SpEAT sweep",
        "6 of 6 runs",
        ["report/figure1_effect_sizes", "report/figure2_layers"],
        ["report/results"],
        [("Sweep", "- 6 runs"), ("Notes", "*demo*")],
    )
    spec = json.loads(report._to_model().model_dump_json(by_alias=True))
    assert spec["displayName"] == "SpEAT sweep" and spec["description"] == "6 of 6 runs"
    assert spec["project"]["name"] == "speechbias"
    blocks = [b for b in spec["spec"]["blocks"] if not (b["type"] == "paragraph" and not b["children"][0]["text"])]
    assert [b["type"] for b in blocks] == [
        "heading",
        "paragraph",
        "panel-grid",
        "heading",
        "markdown-block",
        "heading",
        "markdown-block",
    ]
    assert blocks[0]["level"] == 1 and blocks[0]["children"][0]["text"] == "SpEAT sweep"
    assert [b["content"] for b in blocks if b["type"] == "markdown-block"] == ["- 6 runs", "*demo*"]
    grid = blocks[2]["metadata"]
    [runset] = grid["runSets"]
    assert runset["filters"]["filters"] == [
        {"key": {"section": "run", "name": "group"}, "op": "=", "value": "sweep-1", "disabled": False}
    ]  # every run of the sweep's W&B group
    panels = grid["panelBankSectionConfig"]["panels"]
    media = [p for p in panels if p["viewType"] == "Media Browser"]
    assert [p["config"]["mediaKeys"] for p in media] == [["report/figure1_effect_sizes", "report/figure2_layers"]]
    tables = [p for p in panels if p["viewType"] == "Weave"]
    assert len(tables) == 1 and "report/results" in json.dumps(tables[0]["config"])
