"""End to end: evaluate.py's compose -> run_task for task=spoken_stereoset."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.entry import run_task


def _run(conf_dir, data_dir, out_dir, *overrides):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("evaluate", overrides=["task=spoken_stereoset", f"task.data_dir={data_dir}",
                                             f"paths.output_dir={out_dir}", "logger=none", *overrides],
                      return_hydra_config=True)
    return run_task(cfg)


def test_stereotypical_policy_scores_100_through_the_whole_pipeline(conf_dir, tree, tmp_path):
    root, _ = tree
    out = tmp_path / "run"
    summary = _run(conf_dir, root, out, "sllm=policy", "sllm.policy=stereotypical", "sllm.style=sentence",
                   "task.orders=all")
    assert summary["sllm/gender/slbs"] == 100.0 and summary["sllm/overall/slifs"] == 100.0
    assert summary["sllm/age/slms"] == 100.0
    responses = pd.read_csv(out / "responses.csv")
    assert len(responses) == 6 * 6  # 6 instances x 6 orders
    assert set(responses["method"]) == {"letter"} and set(responses["choice"]) == {"stereotypical"}
    results = pd.read_csv(out / "results.csv")
    assert set(results["model"]) == {"policy_stereotypical", "Oracle", "Always stereotypical", "Random"}
    report = (out / "report.md").read_text()
    assert "Table 3" in report and "| Random" in report and "Dataset statistics" in report
    assert (out / "rouge_l_histogram.png").stat().st_size > 1000
    stats = pd.read_csv(out / "dataset_statistics.csv").set_index("domain")
    assert stats.at["gender", "instances"] == 4
    # a forced rerun reuses every cached answer (the cache file does not grow)
    n_lines = len((out / "responses.jsonl").read_text().splitlines())
    _run(conf_dir, root, out, "sllm=policy", "sllm.policy=stereotypical", "sllm.style=sentence", "task.orders=all",
         "force=true")
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
    assert _run(conf_dir, root, out) == {}
    t = pd.read_csv(out / "results.csv")
    assert set(t["model"]) == {"Oracle", "Always stereotypical", "Random"}
    assert json.loads((out / "summary.json").read_text()) == {}


def test_tiny_random_qwen2_audio_full_path(conf_dir, tree, tmp_path):
    root, _ = tree
    out = tmp_path / "tiny"
    summary = _run(conf_dir, root, out, "sllm=tiny_random_qwen2_audio", "task.max_items=1",
                   "task.sampling.max_new_tokens=4", "task.batch_size=2", "task.statistics.enabled=false")
    responses = pd.read_csv(out / "responses.csv", keep_default_na=False)
    assert len(responses) == 4  # gender item 3 (2 voices) + age item 5 (2 voices)
    assert set(responses["method"]) <= {"letter", "substring", "cer", "none"}
    assert 0.0 <= summary["sllm/overall/slifs"] <= 100.0
    report = (out / "report.md").read_text()
    assert "tiny_random_qwen2_audio" in report and "Answer mapping" in report
    # text-only ablation
    out2 = tmp_path / "tiny_text"
    _run(conf_dir, root, out2, "sllm=tiny_random_qwen2_audio", "task.max_items=1", "task.text_only=true",
         "task.sampling.max_new_tokens=4", "task.statistics.enabled=false")
    assert "tiny_random_qwen2_audio (text only)" in set(pd.read_csv(out2 / "results.csv")["model"])


def test_missing_audio_fails_with_ids_unless_skipped(conf_dir, tmp_path, sllm_tree_maker):
    root = tmp_path / "d"
    sllm_tree_maker(root, drop=(("gender", 17, "Guy"),))
    with pytest.raises(ValueError, match="gender/00017_Guy"):
        _run(conf_dir, root, tmp_path / "a", "sllm=policy")
    _run(conf_dir, root, tmp_path / "b", "sllm=policy", "task.on_missing_audio=skip")
    assert "00017_Guy" in (tmp_path / "b" / "report.md").read_text()


def test_wandb_gets_table3_and_metrics(conf_dir, tree, tmp_path, monkeypatch):
    import speechbias.tasks.spoken_stereoset as task_module

    logged = {}
    sentinel = object()
    monkeypatch.setattr(task_module, "start_logger_run", lambda cfg, out, **kw: sentinel)
    monkeypatch.setattr(task_module.wandb_run, "log_table",
                        lambda run, key, df: logged.setdefault(key, (run, df.copy())))
    monkeypatch.setattr(task_module.wandb_run, "log_metrics", lambda run, m: logged.setdefault("metrics", (run, m)))
    monkeypatch.setattr(task_module.wandb_run, "finish", lambda run: logged.setdefault("finished", (run, None)))
    root, _ = tree
    _run(conf_dir, root, tmp_path / "w", "sllm=policy", "sllm.policy=anti-stereotypical",
         "task.statistics.enabled=false")
    run, t3 = logged["spoken_stereoset/table3"]
    assert run is sentinel and list(t3["model"]) == ["policy_anti-stereotypical", "Oracle", "Always stereotypical",
                                                     "Random"]
    assert t3.set_index("model").at["policy_anti-stereotypical", "gender slbs"] == "0.0"
    assert logged["metrics"][1]["sllm/age/slbs"] == 0.0 and logged["finished"][0] is sentinel
    report = (tmp_path / "w" / "report.md").read_text()
    import re

    assert re.search(r"\| Oracle +\| 100\.0 +\| 100\.0 +\| 50\.0 +\|", report)
