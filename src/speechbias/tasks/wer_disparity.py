"""ASR WER disparity (Fair-Speech): transcribe (cached), score, Table 2 + Table 3, report, W&B.

``python evaluate.py task=wer_disparity`` runs the offline demo (shipped espeak-ng corpus, tiny random
CTC model; every output carries the demo caveat). Real use:
``python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech``
Sharded transcription: ``task.shard_count=N task.shard_index=i`` (only transcribes; rerun unsharded
to analyse from the cache). ``conf/task/wer_disparity.yaml``'s ``run`` node builds :class:`WerDisparityTask`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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
from speechbias.tasks.wer_disparity_settings import CorpusSettings, GlmmSettings, MinGroupSettings, WerDisparitySettings

log = logging.getLogger(__name__)

TASK_NAME = "wer_disparity"


class WerDisparityTask:
    """Transcribe ``corpus`` with ``transcriber`` (hypotheses cached), score and compare groups.

    Args:
        transcriber / corpus: the ASR model and the loaded corpus (``asr=...``, ``corpus=...``);
            None when not chosen (an error naming both).
        hypothesis_cache: builds the model's hypothesis cache from ``fingerprint`` and ``model_fields``.
        writer / tracker: where the run's files go, and what logs the writer's record (W&B).
        asr_demo: a tiny random model (``asr.demo``): with the shipped corpus (``corpus.demo``), every
            output says the numbers are plumbing (the writer's caveat).
        corpus_settings: the corpus's ``name`` (run identity) and ``demo``.
        min_group: the corpus's minimum group sizes (null ones: Fair-Speech's).
        glmm: Table 3's fit (``task.glmm.*``).
        settings: the task's own keys (``task.*``: normalizer, categories, shards, CIs, ...).
        seed: of every resampling. force: rerun a finished run.
    """

    def __init__(
        self,
        transcriber: Transcriber | None,
        corpus: ASRCorpus | None,
        hypothesis_cache: Callable[..., HypothesisCache],
        writer: RunWriter,
        tracker: Tracker,
        asr_demo: bool = False,
        corpus_settings: CorpusSettings = CorpusSettings(),
        min_group: MinGroupSettings = MinGroupSettings(),
        glmm: GlmmSettings = GlmmSettings(),
        settings: WerDisparitySettings = WerDisparitySettings(),
        seed: int = 0,
        force: bool = False,
    ):
        self.transcriber = transcriber
        self.corpus = corpus
        self.corpus_name = corpus_settings.name
        self.hypothesis_cache = hypothesis_cache
        self.writer = writer
        self.tracker = tracker
        self.demo = bool(asr_demo or corpus_settings.demo)
        self.settings = settings
        self.rule = GroupRule(
            min_utterances=MIN_GROUP_UTTERANCES if min_group.utterances is None else min_group.utterances,
            min_speakers=MIN_GROUP_SPEAKERS if min_group.speakers is None else min_group.speakers,
            include_undisclosed=bool(settings.include_undisclosed),
        )
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
            shard_index=self.settings.shard_index,
            shard_count=self.settings.shard_count,
            progress=self.settings.progress,
        )
        counts = {"n_cached": tr.n_cached, "n_transcribed": tr.n_transcribed, "n_audio_failed": len(tr.failed)}
        if self.settings.shard_count > 1:
            self.writer.report(
                report.shard_title(self.settings.shard_index, self.settings.shard_count),
                report.shard_sections(info, counts),
            )
            self.writer.table(
                "results",
                pd.DataFrame(
                    [
                        {
                            **info,
                            "shard_index": self.settings.shard_index,
                            "shard_count": self.settings.shard_count,
                            **counts,
                        }
                    ]
                ),
            )
            return counts
        g = self.glmm
        result = analyse_wer_disparity(
            self.corpus,
            tr.hypotheses,
            tr.failed,
            normalizer=self.settings.normalizer,
            categories=list(self.settings.categories) if self.settings.categories else None,
            covariates=list(g.covariates),
            n_agq=g.n_agq,
            n_resamples=g.n_resamples,
            wer_ci_resamples=self.settings.wer_ci_resamples,
            seed=self.seed,
            confidence=g.confidence,
            rule=self.rule,
            n_jobs=g.n_jobs,
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
            "normalizer": self.settings.normalizer,
            "n_agq": self.glmm.n_agq,
            "n_resamples": self.glmm.n_resamples,
            "seed": self.seed,
            "covariates": list(self.glmm.covariates),
        }
        path = w.report(report.report_title(info), report.report_sections(result, info, settings))
        w.table("results", report.results_table(result, info))
        return path
