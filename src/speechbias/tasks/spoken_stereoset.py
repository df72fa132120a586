"""Task ``spoken_stereoset``: load the set -> ask the speech LLM -> map answers -> slifs/slms/slbs + baselines.

``python evaluate.py task=spoken_stereoset`` alone is the offline demo (shipped synthetic set under
``paths.demo_dir``, tiny random Qwen2-Audio; the demo caveat on console, report.md and figures);
``sllm=qwen2_audio task.data_dir=<released set>`` the real run (``~sllm``: dataset statistics and
baselines only). Writes into the run folder: responses.jsonl (answer cache), responses.csv (every
raw answer with its mapping), results.csv/json (long metric table, model and baselines),
table3.csv/json (Table 3 as printed), dataset_statistics.csv/json, continuation_rouge_l.csv,
rouge_l_histogram.png, report.md, summary.json (last); and W&B tables when ``logger.kind=wandb``.
``conf/task/spoken_stereoset.yaml``'s ``run`` node builds :class:`SpokenStereoSetTask`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from speechbias.report.caveat import DEMO_CAVEAT
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.report.tracker import Tracker
from speechbias.tasks.run_markers import finished_marker
from speechbias.sllm import OTHER
from speechbias.sllm.adapters.base import SamplingParams, SpeechLLM
from speechbias.sllm.answers import RULES, AnswerJudge
from speechbias.sllm.baselines import DEFINES, DISPLAY_NAMES, all_baselines
from speechbias.sllm.data import describe_missing, load_spoken_stereoset
from speechbias.sllm.metrics import ALL_GROUPS, METRICS, summarise
from speechbias.sllm.probe import answer_table, run_probe
from speechbias.sllm.prompts import PromptTemplate, build_requests
from speechbias.sllm.statistics import continuation_rouge_l, dataset_statistics, plot_rouge_l_histogram
from speechbias.sllm.tables import group_sections, table3, to_markdown

log = logging.getLogger(__name__)

TASK_NAME = "spoken_stereoset"


def _summary_metrics(summary: pd.DataFrame, model: str) -> dict:
    cells = summary[(summary["model"] == model) & (summary["group"] == ALL_GROUPS) & summary["metric"].isin(METRICS)]
    return {f"sllm/{r.domain}/{r.metric}": float(r.value) for r in cells.itertuples()}


def _baseline_note() -> str:
    lines = [
        '"-" = not applicable: a baseline is a reference point only for the metrics its definition '
        "speaks to (computed by the same code, the others blanked)."
    ]
    for key, metrics in DEFINES.items():
        lines.append(f"- {DISPLAY_NAMES[key]}: reference for {', '.join(metrics)}")
    return "\n".join(lines)


def is_demo_run(
    setting: str | bool,
    data_dir: str | Path,
    demo_dir: str | Path | None = None,
    model_targets: Sequence[str | None] = (),
) -> bool:
    """Whether a run's numbers are plumbing only. ``setting`` (``task.demo_caveat``): auto | true |
    false. auto: ``data_dir`` lies under ``demo_dir`` (the shipped synthetic set), or one of
    ``model_targets`` (the ``_target_`` of the model and of the judge) is a tiny random one
    (``speechbias.sllm.adapters.tiny``)."""
    setting = str(setting).lower()
    if setting in ("true", "false"):
        return setting == "true"
    if setting != "auto":
        raise ValueError(f"task.demo_caveat must be auto, true or false, got {setting!r}")
    if demo_dir and Path(data_dir).resolve().is_relative_to(Path(demo_dir).resolve()):
        return True
    return any(".adapters.tiny." in str(t or "") for t in model_targets)


class SpokenStereoSetTask:
    """Spoken StereoSet on one speech LLM (or none: statistics and baselines only).

    Args:
        adapter: the speech LLM (``sllm=...``); None with ``~sllm``.
        judge: the optional LLM judge for answers the rules leave undecided (``task.judge``), or None.
        writer / tracker: where the run's files go, and what logs the writer's record (W&B).
        data_dir: the set in its released layout; ``version``, ``domains``, ``on_missing_audio``
            (error | skip) and ``max_items`` (first N item ids per domain, None = all) select from it.
        demo_caveat / demo_dir / model_targets: :func:`is_demo_run`'s arguments.
        orders: option letters, shuffled (one seeded order per instance) | all (all 6 orders).
        text_only: give the context's transcript instead of its audio (ablation).
        batch_size: requests per generate call.
        sampling / prompt: decoding settings and prompt templates.
        cer_threshold / min_word_recall: the answer-mapping rules' thresholds (:mod:`speechbias.sllm.answers`).
        statistics: also compute the dataset statistics (Table 2, Fig. 1) with ``rouge_method``
            (rapidfuzz | rouge_score) and ``histogram_bins``.
        seed: of the option orders and the sampling. force: rerun a finished run.
    """

    def __init__(
        self,
        adapter: SpeechLLM | None,
        judge: AnswerJudge | None,
        writer: RunWriter,
        tracker: Tracker,
        data_dir: str | Path,
        version: str = "v1.0",
        domains: Sequence[str] = ("gender", "age"),
        on_missing_audio: str = "error",
        max_items: int | None = None,
        demo_caveat: str | bool = "auto",
        demo_dir: str | Path | None = None,
        model_targets: Sequence[str | None] = (),
        orders: str = "shuffled",
        text_only: bool = False,
        batch_size: int = 8,
        sampling: SamplingParams = SamplingParams(),
        prompt: PromptTemplate | None = None,
        cer_threshold: float = 0.1,
        min_word_recall: float = 0.8,
        statistics: bool = True,
        rouge_method: str = "rapidfuzz",
        histogram_bins: int = 30,
        seed: int = 0,
        force: bool = False,
    ):
        self.adapter = adapter
        self.judge = judge
        self.writer = writer
        self.tracker = tracker
        self.data_dir = data_dir
        self.version = version
        self.domains = list(domains)
        self.on_missing_audio = on_missing_audio
        self.max_items = max_items
        self.demo_caveat = demo_caveat
        self.demo_dir = demo_dir
        self.model_targets = list(model_targets)
        self.orders = orders
        self.text_only = bool(text_only)
        self.batch_size = int(batch_size)
        self.sampling = sampling
        self.prompt = prompt
        self.cer_threshold = float(cer_threshold)
        self.min_word_recall = float(min_word_recall)
        self.statistics = bool(statistics)
        self.rouge_method = rouge_method
        self.histogram_bins = int(histogram_bins)
        self.seed = int(seed)
        self.force = bool(force)

    def run(self, config: dict | None = None) -> dict:
        """Ask, map, score, write, publish; returns the model's ``sllm/<domain>/<metric>`` values
        ({} without a model). ``config``: the run's resolved config (the tracker's run config)."""
        w = self.writer
        done = finished_marker(TASK_NAME, w.output_dir, self.force)
        if done:
            return json.loads(done.read_text())
        dataset = load_spoken_stereoset(
            self.data_dir,
            domains=self.domains,
            version=self.version,
            on_missing_audio=self.on_missing_audio,
            max_items=self.max_items,
        )
        table = dataset.table
        if table.empty:
            raise ValueError(f"{self.data_dir}: no instance with audio to evaluate")
        caveat = (
            DEMO_CAVEAT if is_demo_run(self.demo_caveat, self.data_dir, self.demo_dir, self.model_targets) else None
        )
        w.caveat = caveat  # said on the console once, with the report line
        summaries, answers, model_label = [], None, None
        if self.adapter is not None:
            model_label = self.adapter.name + (" (text only)" if self.text_only else "")
            answers = self._ask(table)
            w.table("responses", answers)
            model_summary = summarise(answers, model=model_label)
            model_summary["condition"] = "text_only" if self.text_only else "audio"
            model_summary["defined"] = True
            summaries.append(model_summary)
        baselines = all_baselines(table)
        baselines["condition"] = "baseline"
        summaries.append(baselines)
        summary = pd.concat(summaries, ignore_index=True)

        metrics = _summary_metrics(summary, model_label) if model_label else {}
        w.metrics(metrics)
        t3 = table3(summary)
        w.table("table3", t3, tracker_key="spoken_stereoset/table3")
        w.table("results", summary, tracker_key="spoken_stereoset/results")
        per_domain = ", ".join(f"{d}: {n}" for d, n in table.groupby("domain", sort=False).size().items())
        sections = [
            (
                "Data",
                f"{len(table)} instances from {self.data_dir} ({per_domain})"
                + (f"; {describe_missing(dataset.missing)} (skipped)" if len(dataset.missing) else ""),
            )
        ]
        sections.append(("Table 3: slifs / slms / slbs (%)", to_markdown(t3) + "\n\n" + _baseline_note()))
        sections.extend(group_sections(summary))  # the model's groups, then the baselines' own table
        if answers is not None:
            rules = answers.groupby(["domain", "rule"]).size().unstack(fill_value=0)
            rules = rules[[r for r in RULES if r in rules.columns]].reset_index()
            sections.append(
                (
                    "Answer mapping",
                    "Answers per rule that decided them (our rule cascade, "
                    "speechbias.sllm.answers; none = "
                    f"{OTHER}):\n\n"
                    + markdown_table(rules)
                    + "\n\nEvery raw answer with its rule and reason: responses.csv",
                )
            )
        if self.statistics:
            sections.append(self._write_statistics(table))
        report = w.report(f"Spoken StereoSet: {model_label or 'baselines only'}", sections)
        w.json("summary.json", metrics)
        if caveat:
            log.warning("report: %s (%s)", report, caveat)
        self.tracker.publish(
            w,
            job_type=TASK_NAME,
            name=f"spoken_stereoset/{model_label or 'baselines'}",
            tags=[TASK_NAME, model_label or "baselines"],
            config=config,
        )
        return metrics

    def _ask(self, table: pd.DataFrame) -> pd.DataFrame:
        """Every request's raw answer (cached in responses.jsonl) mapped to an option: :func:`answer_table`."""
        requests = build_requests(table, self.prompt, orders=self.orders, seed=self.seed, text_only=self.text_only)
        log.info(
            "asking %s %d questions (%d instances, orders=%s, text_only=%s)",
            self.adapter.name,
            len(requests),
            len(table),
            self.orders,
            self.text_only,
        )
        responses = run_probe(
            requests,
            self.adapter,
            self.sampling,
            self.writer.path("responses.jsonl"),
            batch_size=self.batch_size,
            seed=self.seed,
        )
        return answer_table(
            requests,
            responses,
            cer_threshold=self.cer_threshold,
            judge=self.judge,
            min_word_recall=self.min_word_recall,
        )

    def _write_statistics(self, table: pd.DataFrame) -> tuple[str, str]:
        """dataset_statistics and continuation_rouge_l (.csv + .json), rouge_l_histogram.png; returns
        the report section."""
        w = self.writer
        rouge = continuation_rouge_l(table, method=self.rouge_method)
        stats = dataset_statistics(table, rouge)
        w.table("dataset_statistics", stats)
        w.table("continuation_rouge_l", rouge)
        w.figure(
            "rouge_l_histogram",
            plot_rouge_l_histogram(rouge, bins=self.histogram_bins),
            tracker_key="spoken_stereoset/rouge_l_histogram",
        )
        return (
            "Dataset statistics (Table 2)",
            markdown_table(stats) + "\n\n![mean ROUGE-L of each "
            "continuation against the others of its domain](rouge_l_histogram.png)",
        )
