"""ASR WER disparity (Fair-Speech): transcribe (cached), score, Table 2 + Table 3, report, W&B.

``python evaluate.py task=wer_disparity`` runs the offline demo (shipped espeak-ng corpus, tiny random
CTC model; every output carries the demo caveat). Real use:
``python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech``
Sharded transcription: ``task.shard_count=N task.shard_index=i`` (only transcribes; rerun unsharded
to analyse from the cache). ``conf/task/wer_disparity.yaml``'s ``run`` node builds :class:`WerDisparityTask`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from speechbias.asr import report
from speechbias.asr.analysis import analyse_wer_disparity
from speechbias.asr.cache import HypothesisCache
from speechbias.asr.corpora import ASRCorpus
from speechbias.asr.groups import MIN_GROUP_SPEAKERS, MIN_GROUP_UTTERANCES, GroupRule
from speechbias.asr.models import Transcriber
from speechbias.asr.transcribe import transcribe_corpus
from speechbias.report.caveat import DEMO_CAVEAT, warn_once_per_sweep
from speechbias.report.run_writer import RunWriter
from speechbias.report.tracker import Tracker
from speechbias.tasks.run_markers import finished_marker

log = logging.getLogger(__name__)

TASK_NAME = "wer_disparity"


@dataclass(frozen=True)
class GlmmSettings:
    """Table 3's mixed-effects Poisson fit: ``n_agq`` 1 = Laplace, k > 1 = adaptive Gauss-Hermite with
    k nodes; extra fixed-effect ``covariates`` (utterance-table columns); speaker-bootstrap
    ``n_resamples`` for the CIs at level ``confidence``; ``n_jobs`` parallel fits."""

    n_agq: int = 1
    covariates: Sequence[str] = ()
    n_resamples: int = 1000
    confidence: float = 0.95
    n_jobs: int = 1


def group_rule(min_group: dict | None, include_undisclosed: bool = False) -> GroupRule:
    """Minimum group sizes from the corpus config's ``min_group`` (``utterances``, ``speakers``: its
    paper's scale); code defaults (Fair-Speech) for what it leaves out."""
    mg = min_group or {}
    return GroupRule(
        min_utterances=int(mg.get("utterances", MIN_GROUP_UTTERANCES)),
        min_speakers=int(mg.get("speakers", MIN_GROUP_SPEAKERS)),
        include_undisclosed=bool(include_undisclosed),
    )


class WerDisparityTask:
    """Transcribe ``corpus`` with ``transcriber`` (hypotheses cached), score and compare groups.

    Args:
        transcriber / corpus: the ASR model and the loaded corpus (``asr=...``, ``corpus=...``);
            None when not chosen (an error naming both).
        corpus_name: the corpus config's ``name`` (run identity).
        hypothesis_cache: builds the model's hypothesis cache from ``fingerprint`` and ``model_fields``.
        writer / tracker: where the run's files go, and what logs the writer's record (W&B).
        asr_demo / corpus_demo: a tiny random model / the shipped synthetic corpus: every output says
            the numbers are plumbing (the writer's caveat).
        min_group: the corpus's minimum group sizes (``utterances``, ``speakers``), None = defaults.
        normalizer: text normalisation before scoring (whisper_english | whisper_basic | none).
        categories: demographic columns to compare; None = the corpus's.
        include_undisclosed: compare the level "undisclosed" like a group.
        shard_index / shard_count: transcribe only this shard (no analysis when shard_count > 1).
        progress: show the transcription progress bar.
        wer_ci_resamples: bootstrap resamples of Table 2's per-group WER CIs.
        glmm: Table 3's fit (:class:`GlmmSettings`).
        seed: of every resampling. force: rerun a finished run.
    """

    def __init__(
        self,
        transcriber: Transcriber | None,
        corpus: ASRCorpus | None,
        corpus_name: str | None,
        hypothesis_cache: Callable[..., HypothesisCache],
        writer: RunWriter,
        tracker: Tracker,
        asr_demo: bool = False,
        corpus_demo: bool = False,
        min_group: dict | None = None,
        normalizer: str = "whisper_english",
        categories: Sequence[str] | None = None,
        include_undisclosed: bool = False,
        shard_index: int = 0,
        shard_count: int = 1,
        progress: bool = True,
        wer_ci_resamples: int = 1000,
        glmm: GlmmSettings = GlmmSettings(),
        seed: int = 0,
        force: bool = False,
    ):
        self.transcriber = transcriber
        self.corpus = corpus
        self.corpus_name = corpus_name
        self.hypothesis_cache = hypothesis_cache
        self.writer = writer
        self.tracker = tracker
        self.demo = bool(asr_demo or corpus_demo)
        self.rule = group_rule(min_group, include_undisclosed)
        self.normalizer = normalizer
        self.categories = list(categories) if categories else None
        self.shard_index = int(shard_index)
        self.shard_count = int(shard_count)
        self.progress = bool(progress)
        self.wer_ci_resamples = int(wer_ci_resamples)
        self.glmm = glmm
        self.seed = int(seed)
        self.force = bool(force)

    def run(self, config: dict | None = None) -> dict:
        """Transcribe, analyse, write the outputs, publish; returns the summary metrics (``wer/...``
        and the transcription counts), or the counts alone for a shard. ``config``: the run's
        resolved config (the tracker's run config)."""
        if finished_marker(TASK_NAME, self.writer.output_dir, self.force):
            return {"skipped": True}
        if self.transcriber is None or self.corpus is None:
            raise ValueError(
                "task=wer_disparity needs an ASR model and a corpus, e.g. asr=whisper_small corpus=fair_speech"
            )
        # demo = shipped synthetic corpus or a tiny random model: plumbing, not findings
        self.writer.caveat = DEMO_CAVEAT if self.demo else None  # said on the console once, with the result
        transcriber = self.transcriber
        cache = self.hypothesis_cache(
            fingerprint=transcriber.fingerprint, model_fields=transcriber.fingerprint_fields()
        )
        info = {"asr": transcriber.name, "corpus": str(self.corpus_name), "asr_fingerprint": transcriber.fingerprint}
        tr = transcribe_corpus(
            self.corpus.utterances,
            transcriber,
            cache,
            shard_index=self.shard_index,
            shard_count=self.shard_count,
            progress=self.progress,
        )
        counts = {"n_cached": tr.n_cached, "n_transcribed": tr.n_transcribed, "n_audio_failed": len(tr.failed)}
        if self.shard_count > 1:
            self.writer.report(
                report.shard_title(self.shard_index, self.shard_count), report.shard_sections(info, counts)
            )
            self.writer.table(
                "results",
                pd.DataFrame([{**info, "shard_index": self.shard_index, "shard_count": self.shard_count, **counts}]),
            )
            return counts
        g = self.glmm
        result = analyse_wer_disparity(
            self.corpus,
            tr.hypotheses,
            tr.failed,
            normalizer=self.normalizer,
            categories=self.categories,
            covariates=list(g.covariates or []),
            n_agq=int(g.n_agq),
            n_resamples=int(g.n_resamples),
            wer_ci_resamples=self.wer_ci_resamples,
            seed=self.seed,
            confidence=float(g.confidence),
            rule=self.rule,
            n_jobs=int(g.n_jobs),
        )
        log.info(
            "levels (utterances; not compared: why):\n  %s", "\n  ".join(report.levels_console_lines(result.levels))
        )
        metrics = report.wer_metrics(result)
        report_path = self._write_outputs(result, info, metrics)
        self.tracker.publish(
            self.writer,
            job_type=TASK_NAME,
            name=f"{info['asr']}/{info['corpus']}",
            tags=[info["asr"], info["corpus"], TASK_NAME],
            config=config,
        )
        log.info(
            "WER disparity: %s on %s, overall WER %.2f%%, %d excluded; report %s",
            info["asr"],
            info["corpus"],
            100 * metrics["wer/overall"],
            len(result.excluded),
            report_path,
        )
        if self.demo:
            warn_once_per_sweep(log, DEMO_CAVEAT, self.writer.output_dir)
        return {**metrics, **counts, "n_excluded": len(result.excluded)}

    def _write_outputs(self, result, info: dict, metrics: dict):
        """metrics; table2/table3/gaps/levels/excluded (.csv + .json), utterances.csv, wer_by_group.png,
        report.md; results.csv/json last (the finished marker). Returns the report path."""
        w = self.writer
        w.metrics(metrics)
        for stem, df, key in (
            ("table2", result.table2, "wer/table2"),
            ("table3", result.table3, "wer/table3"),
            ("gaps", result.gaps, None),
            ("levels", result.levels, "wer/levels"),
            ("excluded", result.excluded, None),
        ):
            w.table(stem, df, tracker_key=key)
        w.text("utterances.csv", report.utterance_table(result).to_csv(index=False))
        w.figure(
            "wer_by_group",
            report.wer_bar_chart(result.table2, title=f"WER by group: {info['asr']}"),
            tracker_key="wer/by_group",
        )
        settings = {
            "normalizer": self.normalizer,
            "n_agq": int(self.glmm.n_agq),
            "n_resamples": int(self.glmm.n_resamples),
            "seed": self.seed,
            "covariates": list(self.glmm.covariates or []),
        }
        path = w.report(report.report_title(info), report.report_sections(result, info, settings))
        w.table("results", report.results_table(result, info))
        return path
