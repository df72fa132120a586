"""End to end: evaluate.py's compose -> run_task for task=spoken_stereoset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.launch.entry import run_task
from speechbias.report.caveat import DEMO_CAVEAT
from speechbias.sllm.answers import METHODS, RULES
from speechbias.sllm.data import load_spoken_stereoset
from speechbias.tasks.spoken_stereoset import is_demo_run
from speechbias.tasks.spoken_stereoset_settings import SpokenStereoSetSettings

REPO_ROOT = Path(__file__).resolve().parents[2]


def _compose(conf_dir, *overrides):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(
            "evaluate", overrides=["task=spoken_stereoset", "logger=none", *overrides], return_hydra_config=True
        )


def _run(conf_dir, data_dir, out_dir, *overrides):
    return run_task(_compose(conf_dir, f"task.data_dir={data_dir}", f"paths.output_dir={out_dir}", *overrides))


def test_stereotypical_policy_scores_100_through_the_whole_pipeline(conf_dir, tree, tmp_path):
    root, _ = tree
    out = tmp_path / "run"
    summary = _run(
        conf_dir, root, out, "sllm=policy", "sllm.policy=stereotypical", "sllm.style=sentence", "task.orders=all"
    )
    assert summary["sllm/gender/slbs"] == 100.0 and summary["sllm/overall/slifs"] == 100.0
    assert summary["sllm/age/slms"] == 100.0
    responses = pd.read_csv(out / "responses.csv")
    assert len(responses) == 6 * 6  # 6 instances x 6 orders
    assert set(responses["rule"]) == {"letter_only"} and set(responses["choice"]) == {"stereotypical"}
    results = pd.read_csv(out / "results.csv")
    assert set(results["model"]) == {"policy_stereotypical", "Oracle", "Always stereotypical", "Random"}
    report = (out / "report.md").read_text()
    assert "Table 3" in report and "| Random" in report and "Dataset statistics" in report
    assert (out / "rouge_l_histogram.png").stat().st_size > 1000
    stats = pd.read_csv(out / "dataset_statistics.csv").set_index("domain")
    assert stats.at["gender", "instances"] == 4
    # a forced rerun reuses every cached answer (the cache file does not grow)
    n_lines = len((out / "responses.jsonl").read_text().splitlines())
    _run(
        conf_dir,
        root,
        out,
        "sllm=policy",
        "sllm.policy=stereotypical",
        "sllm.style=sentence",
        "task.orders=all",
        "force=true",
    )
    assert len((out / "responses.jsonl").read_text().splitlines()) == n_lines


def test_irrelevant_and_refusing_policies(conf_dir, tree, tmp_path):
    root, _ = tree
    s = _run(conf_dir, root, tmp_path / "irr", "sllm=policy", "sllm.policy=irrelevant")
    assert s["sllm/overall/slifs"] == 100.0 and s["sllm/overall/slms"] == 0.0
    assert s["sllm/overall/slbs"] != s["sllm/overall/slbs"]  # NaN: no meaningful answer
    s = _run(conf_dir, root, tmp_path / "ref", "sllm=policy", "sllm.policy=refuse", "task.statistics.enabled=false")
    assert s["sllm/overall/slifs"] == 0.0


def test_baselines_only_without_a_model(conf_dir, tree, tmp_path):
    root, _ = tree
    out = tmp_path / "base"
    assert _run(conf_dir, root, out, "~sllm") == {}
    t = pd.read_csv(out / "results.csv")
    assert set(t["model"]) == {"Oracle", "Always stereotypical", "Random"}
    assert json.loads((out / "summary.json").read_text()) == {}


def test_tiny_random_qwen2_audio_full_path(conf_dir, tree, tmp_path):
    root, _ = tree
    out = tmp_path / "tiny"
    summary = _run(
        conf_dir,
        root,
        out,
        "sllm=tiny_random_qwen2_audio",
        "task.max_items=1",
        "task.sampling.max_new_tokens=4",
        "task.batch_size=2",
        "task.statistics.enabled=false",
        "task.judge={_target_: speechbias.sllm.adapters.tiny.tiny_chat_judge}",
    )
    responses = pd.read_csv(out / "responses.csv", keep_default_na=False)
    assert len(responses) == 4  # gender item 3 (2 voices) + age item 5 (2 voices)
    assert set(responses["rule"]) <= set(RULES) and set(responses["method"]) <= set(METHODS)
    assert all(RULES[r] == m for r, m in zip(responses["rule"], responses["method"]))
    assert 0.0 <= summary["sllm/overall/slifs"] <= 100.0
    report = (out / "report.md").read_text()
    assert "tiny_random_qwen2_audio" in report and "Answer mapping" in report
    # text-only ablation
    out2 = tmp_path / "tiny_text"
    _run(
        conf_dir,
        root,
        out2,
        "sllm=tiny_random_qwen2_audio",
        "task.max_items=1",
        "task.text_only=true",
        "task.sampling.max_new_tokens=4",
        "task.statistics.enabled=false",
    )
    assert "tiny_random_qwen2_audio (text only)" in set(pd.read_csv(out2 / "results.csv")["model"])


def test_missing_audio_fails_with_ids_unless_skipped(conf_dir, tmp_path, sllm_tree_maker):
    root = tmp_path / "d"
    sllm_tree_maker(root, drop=(("gender", 17, "Guy"),))
    with pytest.raises(ValueError, match="gender/00017_Guy"):
        _run(conf_dir, root, tmp_path / "a", "sllm=policy")
    _run(conf_dir, root, tmp_path / "b", "sllm=policy", "task.on_missing_audio=skip")
    assert "00017_Guy" in (tmp_path / "b" / "report.md").read_text()


def test_wandb_gets_table3_and_metrics(conf_dir, tree, tmp_path, monkeypatch):
    import speechbias.report.tracker as tracker_module

    logged = {}
    sentinel = object()
    monkeypatch.setattr(tracker_module.wandb_run, "start_run", lambda **kw: sentinel)
    monkeypatch.setattr(
        tracker_module.wandb_run, "log_table", lambda run, key, df: logged.setdefault(key, (run, df.copy()))
    )
    monkeypatch.setattr(
        tracker_module.wandb_run, "log_metrics", lambda run, m, step=None: logged.setdefault("metrics", (run, m))
    )
    monkeypatch.setattr(tracker_module.wandb_run, "finish", lambda run: logged.setdefault("finished", (run, None)))
    root, _ = tree
    out = tmp_path / "w"
    _run(
        conf_dir,
        root,
        out,
        "sllm=policy",
        "sllm.policy=anti-stereotypical",
        "task.statistics.enabled=false",
        "logger=wandb",
    )
    run, t3 = logged["spoken_stereoset/table3"]
    assert run is sentinel and list(t3["model"]) == [
        "policy_anti-stereotypical",
        "Oracle",
        "Always stereotypical",
        "Random",
    ]
    # W&B gets Table 3 in the report's formatted values (strings, as table3.json records them)
    assert t3.set_index("model").at["policy_anti-stereotypical", "gender slbs"] == "0.0"
    printed = pd.read_csv(out / "table3.csv", dtype=str, keep_default_na=False).set_index("model")
    assert printed.at["policy_anti-stereotypical", "gender slbs"] == "0.0"
    assert logged["metrics"][1]["sllm/age/slbs"] == 0.0 and logged["finished"][0] is sentinel
    report = (out / "report.md").read_text()
    import re

    assert re.search(r"\| Oracle +\| 100\.0 +\| 100\.0 +\| 50\.0 +\|", report)


def test_bare_task_defaults_to_the_shipped_demo_set_and_the_tiny_model(conf_dir):
    cfg = _compose(conf_dir)
    assert cfg.sllm["_target_"] == "speechbias.sllm.adapters.tiny.tiny_qwen2_audio_adapter"
    demo = Path(cfg.task.data_dir)
    assert demo == REPO_ROOT / "experiments" / "demo" / "spoken_stereoset"
    # the shipped set: released layout, every row has its audio, small
    dataset = load_spoken_stereoset(demo)
    assert len(dataset.table) == 14 and dataset.missing.empty
    assert set(dataset.table.groupby("domain").size().to_dict()) == {"gender", "age"}
    assert sum(f.stat().st_size for f in demo.rglob("*") if f.is_file()) < 1_000_000
    # real usage still composes: another model, another folder, or no model
    cfg = _compose(conf_dir, "sllm=qwen2_audio", "task.data_dir=/data/spoken_stereoset")
    assert cfg.sllm.model_id == "Qwen/Qwen2-Audio-7B-Instruct" and cfg.task.data_dir == "/data/spoken_stereoset"
    assert _compose(conf_dir, "~sllm").get("sllm") is None


def test_demo_caveat_on_demo_data_and_not_on_real_runs(conf_dir, tree, tmp_path):
    out = tmp_path / "demo"
    run_task(_compose(conf_dir, f"paths.output_dir={out}", "sllm=policy"))  # shipped demo set
    report = (out / "report.md").read_text()
    assert DEMO_CAVEAT in report and report.index(DEMO_CAVEAT) < report.index("Table 3")
    assert (out / "rouge_l_histogram.png").stat().st_size > 1000
    root, _ = tree
    _run(conf_dir, root, tmp_path / "real", "sllm=policy", "task.statistics.enabled=false")
    assert "DEMO" not in (tmp_path / "real" / "report.md").read_text()
    # a tiny random model is plumbing wherever its data come from
    cfg = _compose(conf_dir, f"task.data_dir={root}")
    assert _is_demo_run(cfg) and not _is_demo_run(_compose(conf_dir, f"task.data_dir={root}", "task.demo_caveat=false"))
    assert not _is_demo_run(_compose(conf_dir, f"task.data_dir={root}", "sllm=policy"))
    assert _is_demo_run(
        _compose(
            conf_dir,
            f"task.data_dir={root}",
            "sllm=policy",
            "task.judge={_target_: speechbias.sllm.adapters.tiny.tiny_chat_judge}",
        )
    )


def _is_demo_run(cfg) -> bool:
    """is_demo_run with the arguments the task config gives the task (its settings group: as the entry point
    builds it, launch.entry.build_task)."""
    run = cfg.task.run
    settings = SpokenStereoSetSettings.from_config(cfg)
    return is_demo_run(settings.demo_caveat, settings.data_dir, run.demo_dir, list(run.model_targets))


@pytest.mark.slow
def test_bare_command_runs_offline_from_any_folder(tmp_path):
    """``python evaluate.py task=spoken_stereoset`` with no further arguments (about 1 min on 2 free cores)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("PROJECT_ROOT", None)
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "evaluate.py"),
            "task=spoken_stereoset",
            "logger=none",
            f"paths.output_root={tmp_path / 'out'}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert DEMO_CAVEAT in proc.stdout + proc.stderr
    (report,) = (tmp_path / "out").rglob("report.md")
    text = report.read_text()
    assert DEMO_CAVEAT in text and "tiny_random_qwen2_audio" in text
    responses = pd.read_csv(report.parent / "responses.csv", keep_default_na=False)
    assert len(responses) == 14 and set(responses["rule"]) <= set(RULES)
