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
from speechbias.tasks.spoken_stereoset_settings import AnswerSettings, SpokenStereoSetSettings, StatisticsSettings
from speechbias.sllm import OTHER
from speechbias.sllm.adapters.base import SamplingParams, SpeechLLM
from speechbias.sllm.answers import RULES, AnswerJudge
from speechbias.sllm.baselines import DEFINES, DISPLAY_NAMES, all_baselines
from speechbias.sllm.data import describe_missing, load_spoken_stereoset
from speechbias.sllm.metrics import ALL_GROUPS, METRICS, summarise
from speechbias.sllm.probe import answer_table, run_probe
from speechbias.sllm.prompts import PromptTemplate, build_requests
from speechbias.sllm.statistics import continuation_rouge_l, dataset_statistics, plot_rouge_l_histogram
from speechbias.sllm.tables import BASELINE_CONDITION, group_sections, table3, to_markdown

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
        settings: ``task.*`` (the set: data_dir, version, domains, on_missing_audio, max_items; demo_caveat;
            option orders; the text-only ablation; batch_size).
        sampling / prompt: decoding settings and prompt templates (``task.sampling``, ``task.prompt``).
        answer: the answer-mapping rules' thresholds (``task.answer``, :mod:`speechbias.sllm.answers`).
        statistics: the dataset statistics (Table 2, Fig. 1): whether and how (``task.statistics``).
        demo_dir / model_targets: :func:`is_demo_run`'s arguments.
        seed: of the option orders and the sampling. force: rerun a finished run.
    """

    def __init__(
        self,
        adapter: SpeechLLM | None,
        judge: AnswerJudge | None,
        writer: RunWriter,
        tracker: Tracker,
        settings: SpokenStereoSetSettings,
        prompt: PromptTemplate,
        sampling: SamplingParams = SamplingParams(),
        answer: AnswerSettings = AnswerSettings(),
        statistics: StatisticsSettings = StatisticsSettings(),
        demo_dir: str | Path | None = None,
        model_targets: Sequence[str | None] = (),
        seed: int = 0,
        force: bool = False,
    ):
        self.adapter = adapter
        self.judge = judge
        self.writer = writer
        self.tracker = tracker
        self.settings = settings
        self.sampling = sampling
        self.prompt = prompt
        self.answer = answer
        self.statistics = statistics
        self.demo_dir = demo_dir
        self.model_targets = list(model_targets)
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
            self.settings.data_dir,
            domains=list(self.settings.domains),
            version=self.settings.version,
            on_missing_audio=self.settings.on_missing_audio,
            max_items=self.settings.max_items,
        )
        table = dataset.table
        if table.empty:
            raise ValueError(f"{self.settings.data_dir}: no instance with audio to evaluate")
        caveat = (
            DEMO_CAVEAT
            if is_demo_run(self.settings.demo_caveat, self.settings.data_dir, self.demo_dir, self.model_targets)
            else None
        )
        w.caveat = caveat  # said on the console once, with the report line
        summaries, answers, model_label = [], None, None
        if self.adapter is not None:
            model_label = self.adapter.name + (" (text only)" if self.settings.text_only else "")
            answers = self._ask(table)
            w.table("responses", answers)
            model_summary = summarise(answers, model=model_label)
            model_summary["condition"] = "text_only" if self.settings.text_only else "audio"
            model_summary["defined"] = True
            summaries.append(model_summary)
        baselines = all_baselines(table)
        baselines["condition"] = BASELINE_CONDITION
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
                f"{len(table)} instances from {self.settings.data_dir} ({per_domain})"
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
        if self.statistics.enabled:
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
        requests = build_requests(
            table, self.prompt, orders=self.settings.orders, seed=self.seed, text_only=self.settings.text_only
        )
        log.info(
            "asking %s %d questions (%d instances, orders=%s, text_only=%s)",
            self.adapter.name,
            len(requests),
            len(table),
            self.settings.orders,
            self.settings.text_only,
        )
        responses = run_probe(
            requests,
            self.adapter,
            self.sampling,
            self.writer.path("responses.jsonl"),
            batch_size=self.settings.batch_size,
            seed=self.seed,
        )
        return answer_table(
            requests,
            responses,
            cer_threshold=self.answer.cer_threshold,
            judge=self.judge,
            min_word_recall=self.answer.min_word_recall,
        )

    def _write_statistics(self, table: pd.DataFrame) -> tuple[str, str]:
        """dataset_statistics and continuation_rouge_l (.csv + .json), rouge_l_histogram.png; returns
        the report section."""
        w = self.writer
        rouge = continuation_rouge_l(table, method=self.statistics.rouge_method)
        stats = dataset_statistics(table, rouge)
        w.table("dataset_statistics", stats)
        w.table("continuation_rouge_l", rouge)
        w.figure(
            "rouge_l_histogram",
            plot_rouge_l_histogram(rouge, bins=self.statistics.histogram_bins),
            tracker_key="spoken_stereoset/rouge_l_histogram",
        )
        return (
            "Dataset statistics (Table 2)",
            markdown_table(stats) + "\n\n![mean ROUGE-L of each "
            "continuation against the others of its domain](rouge_l_histogram.png)",
        )
