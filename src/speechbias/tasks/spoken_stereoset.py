"""Task ``spoken_stereoset``: load the set -> ask the speech LLM -> map answers -> slifs/slms/slbs + baselines.

``python evaluate.py task=spoken_stereoset`` alone is the offline demo (shipped synthetic set under
``paths.demo_dir``, tiny random Qwen2-Audio; the demo caveat on console, report.md and figures);
``sllm=qwen2_audio task.data_dir=<released set>`` the real run (``~sllm``: dataset statistics and
baselines only). Writes into the run folder: responses.jsonl (answer cache), responses.csv (every
raw answer with its mapping), results.csv/json (long metric table, model and baselines),
dataset_statistics.csv/json, continuation_rouge_l.csv, rouge_l_histogram.png, summary.json, report.md;
and a W&B table when ``logger.kind=wandb``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from speechbias.report import wandb_run
from speechbias.report.caveat import DEMO_CAVEAT, markdown_caveat
from speechbias.report.run_files import markdown_table, write_json, write_report, write_results
from speechbias.run_context import start_logger_run
from speechbias.run_markers import finished_results
from speechbias.sllm import OTHER
from speechbias.sllm.adapters.base import SamplingParams
from speechbias.sllm.answers import RULES
from speechbias.sllm.baselines import DEFINES, DISPLAY_NAMES, all_baselines
from speechbias.sllm.data import describe_missing, load_spoken_stereoset
from speechbias.sllm.metrics import ALL_GROUPS, METRICS, summarise
from speechbias.sllm.probe import answer_table, run_probe
from speechbias.sllm.prompts import PromptTemplate, build_requests
from speechbias.sllm.statistics import continuation_rouge_l, dataset_statistics, plot_rouge_l_histogram
from speechbias.sllm.tables import group_table, table3, to_markdown

log = logging.getLogger(__name__)


def _summary_metrics(summary: pd.DataFrame, model: str) -> dict:
    cells = summary[(summary["model"] == model) & (summary["group"] == ALL_GROUPS) & summary["metric"].isin(METRICS)]
    return {f"sllm/{r.domain}/{r.metric}": float(r.value) for r in cells.itertuples()}


def _baseline_note() -> str:
    lines = ["\"-\" = not applicable: a baseline is a reference point only for the metrics its definition "
             "speaks to (computed by the same code, the others blanked)."]
    for key, metrics in DEFINES.items():
        lines.append(f"- {DISPLAY_NAMES[key]}: reference for {', '.join(metrics)}")
    return "\n".join(lines)


def is_demo_run(cfg: DictConfig) -> bool:
    """Whether this run's numbers are plumbing only (``task.demo_caveat``: auto | true | false). auto:
    the data lie under ``paths.demo_dir`` (the shipped synthetic set), or the model or the judge is a
    tiny random one (``speechbias.sllm.adapters.tiny``)."""
    setting = str(cfg.task.get("demo_caveat", "auto")).lower()
    if setting in ("true", "false"):
        return setting == "true"
    if setting != "auto":
        raise ValueError(f"task.demo_caveat must be auto, true or false, got {setting!r}")
    demo_dir = cfg.paths.get("demo_dir")
    if demo_dir and Path(cfg.task.data_dir).resolve().is_relative_to(Path(demo_dir).resolve()):
        return True
    targets = [str(part.get("_target_", "")) for part in (cfg.get("sllm"), cfg.task.get("judge")) if part]
    return any(".adapters.tiny." in t for t in targets)


def run(cfg: DictConfig, output_dir: Path) -> dict:
    output_dir = Path(output_dir)
    task = cfg.task
    done = output_dir / "summary.json"
    if finished_results(cfg, output_dir):
        return json.loads(done.read_text())
    dataset = load_spoken_stereoset(task.data_dir, domains=list(task.domains), version=task.version,
                                    on_missing_audio=task.on_missing_audio, max_items=task.max_items)
    table = dataset.table
    if table.empty:
        raise ValueError(f"{task.data_dir}: no instance with audio to evaluate")
    caveat = DEMO_CAVEAT if is_demo_run(cfg) else None
    if caveat:
        log.warning(caveat)
    summaries, answers, model_label = [], None, None
    sllm_cfg = cfg.get("sllm")
    if sllm_cfg is not None:
        adapter = hydra.utils.instantiate(sllm_cfg)
        text_only = bool(task.text_only)
        model_label = adapter.name + (" (text only)" if text_only else "")
        requests = build_requests(table, PromptTemplate(**OmegaConf.to_container(task.prompt, resolve=True)),
                                  orders=task.orders, seed=int(cfg.seed), text_only=text_only)
        sampling = SamplingParams(**OmegaConf.to_container(task.sampling, resolve=True))
        log.info("asking %s %d questions (%d instances, orders=%s, text_only=%s)", adapter.name, len(requests),
                 len(table), task.orders, text_only)
        responses = run_probe(requests, adapter, sampling, output_dir / "responses.jsonl",
                              batch_size=int(task.batch_size), seed=int(cfg.seed))
        judge = hydra.utils.instantiate(task.judge) if task.get("judge") else None
        answers = answer_table(requests, responses, cer_threshold=float(task.answer.cer_threshold), judge=judge,
                               min_word_recall=float(task.answer.get("min_word_recall", 0.8)))
        write_results(answers, output_dir, stem="responses")
        model_summary = summarise(answers, model=model_label)
        model_summary["condition"] = "text_only" if text_only else "audio"
        model_summary["defined"] = True
        summaries.append(model_summary)
    baselines = all_baselines(table)
    baselines["condition"] = "baseline"
    summaries.append(baselines)
    summary = pd.concat(summaries, ignore_index=True)
    write_results(summary, output_dir)

    sections = [("Demo run", markdown_caveat(caveat))] if caveat else []
    sections += [("Data", f"{len(table)} instances from {task.data_dir} "
                         f"({', '.join(f'{d}: {n}' for d, n in table.groupby('domain', sort=False).size().items())})"
                 + (f"; {describe_missing(dataset.missing)} (skipped)" if len(dataset.missing) else ""))]
    t3 = table3(summary)
    sections.append(("Table 3: slifs / slms / slbs (%)", to_markdown(t3) + "\n\n" + _baseline_note()))
    sections.append(("Per speaker group (mean ± SD across speakers)", to_markdown(group_table(summary))))
    if answers is not None:
        rules = answers.groupby(["domain", "rule"]).size().unstack(fill_value=0)
        rules = rules[[r for r in RULES if r in rules.columns]].reset_index()
        sections.append(("Answer mapping", "Answers per rule that decided them (our rule cascade, "
                         "speechbias.sllm.answers; none = " f"{OTHER}):\n\n" + markdown_table(rules)
                         + "\n\nEvery raw answer with its rule and reason: responses.csv"))
    images = {}
    if task.statistics.enabled:
        rouge = continuation_rouge_l(table, method=task.statistics.rouge_method)
        stats = dataset_statistics(table, rouge)
        write_results(stats, output_dir, stem="dataset_statistics")
        write_results(rouge, output_dir, stem="continuation_rouge_l")
        images["spoken_stereoset/rouge_l_histogram"] = plot_rouge_l_histogram(
            rouge, output_dir / "rouge_l_histogram.png", bins=int(task.statistics.histogram_bins), caveat=caveat)
        sections.append(("Dataset statistics (Table 2)", markdown_table(stats) + "\n\n![mean ROUGE-L of each "
                         "continuation against the others of its domain](rouge_l_histogram.png)"))
    write_report(output_dir, f"Spoken StereoSet: {model_label or 'baselines only'}", sections)

    metrics = _summary_metrics(summary, model_label) if model_label else {}
    write_json(metrics, done)
    if caveat:
        log.warning("report: %s (%s)", output_dir / "report.md", caveat)
    run_ = start_logger_run(cfg, output_dir, job_type="spoken_stereoset",
                            name=f"spoken_stereoset/{model_label or 'baselines'}",
                            tags=["spoken_stereoset", model_label or "baselines"])
    try:
        wandb_run.log_metrics(run_, metrics)
        wandb_run.log_table(run_, "spoken_stereoset/table3", t3)
        wandb_run.log_table(run_, "spoken_stereoset/results", summary)
        wandb_run.log_images(run_, images)
    finally:
        wandb_run.finish(run_)
    return metrics
