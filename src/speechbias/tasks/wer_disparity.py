"""ASR WER disparity (Fair-Speech): transcribe (cached), score, Table 2 + Table 3, report, W&B.

``python evaluate.py task=wer_disparity`` runs the offline demo (shipped espeak-ng corpus, tiny random
CTC model; every output carries the demo caveat). Real use:
``python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech``
Sharded transcription: ``task.shard_count=N task.shard_index=i`` (only transcribes; rerun unsharded
to analyse from the cache).
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from speechbias.asr.analysis import analyse_wer_disparity
from speechbias.asr.cache import HypothesisCache
from speechbias.asr.groups import MIN_GROUP_SPEAKERS, MIN_GROUP_UTTERANCES, GroupRule
from speechbias.asr.report import levels_console_lines, write_wer_outputs
from speechbias.asr.transcribe import transcribe_corpus
from speechbias.report import wandb_run
from speechbias.report.caveat import DEMO_CAVEAT, markdown_caveat
from speechbias.report.run_files import write_report, write_results
from speechbias.run_context import start_logger_run
from speechbias.run_markers import finished_results

log = logging.getLogger(__name__)


def group_rule(corpus_cfg: DictConfig, task_cfg: DictConfig) -> GroupRule:
    """Minimum group sizes from the corpus config's ``min_group`` (its paper's scale) and
    ``task.include_undisclosed``; code defaults (Fair-Speech) when a corpus config has none."""
    mg = corpus_cfg.get("min_group") or {}
    return GroupRule(min_utterances=int(mg.get("utterances", MIN_GROUP_UTTERANCES)),
                     min_speakers=int(mg.get("speakers", MIN_GROUP_SPEAKERS)),
                     include_undisclosed=bool(task_cfg.get("include_undisclosed", False)))


def run(cfg: DictConfig, output_dir: Path) -> dict:
    output_dir = Path(output_dir)
    if finished_results(cfg, output_dir):
        return {"skipped": True}
    t = cfg.task
    # without asr=... / corpus=... these are the offline demo's (conf/task/wer_disparity.yaml defaults)
    asr_node, corpus_node = cfg.get("asr"), cfg.get("corpus")
    if asr_node is None or corpus_node is None:
        raise ValueError("task=wer_disparity needs an ASR model and a corpus, "
                         "e.g. asr=whisper_small corpus=fair_speech")
    asr_cfg = OmegaConf.to_container(asr_node, resolve=True)
    # demo = shipped synthetic corpus or a tiny random model: plumbing, not findings
    caveat = DEMO_CAVEAT if (asr_cfg.pop("demo", False) or corpus_node.get("demo", False)) else None
    if caveat:
        log.warning(caveat)
    rule = group_rule(corpus_node, t)
    corpus = hydra.utils.instantiate(corpus_node.load, _convert_="all")
    transcriber = hydra.utils.instantiate(asr_cfg)
    cache = HypothesisCache(Path(cfg.paths.cache_dir) / "asr_hypotheses", transcriber.fingerprint,
                            transcriber.fingerprint_fields())
    info = {"asr": transcriber.name, "corpus": str(corpus_node.name), "asr_fingerprint": transcriber.fingerprint}
    tr = transcribe_corpus(corpus.utterances, transcriber, cache, shard_index=int(t.shard_index),
                           shard_count=int(t.shard_count), progress=bool(t.progress))
    counts = {"n_cached": tr.n_cached, "n_transcribed": tr.n_transcribed, "n_audio_failed": len(tr.failed)}
    if int(t.shard_count) > 1:
        df = pd.DataFrame([{**info, "shard_index": int(t.shard_index), "shard_count": int(t.shard_count), **counts}])
        write_results(df, output_dir)
        shard = ("Shard", "Transcription only; rerun without task.shard_count to analyse from the cache.\n\n"
                 + "\n".join(f"- {k}: {v}" for k, v in {**info, **counts}.items()))
        write_report(output_dir, f"ASR transcription shard {t.shard_index}/{t.shard_count}",
                     ([("Demo", markdown_caveat(caveat))] if caveat else []) + [shard])
        return counts
    g = t.glmm
    settings = {"normalizer": t.normalizer, "n_agq": int(g.n_agq), "n_resamples": int(g.n_resamples),
                "seed": int(cfg.seed), "covariates": list(g.covariates or [])}
    result = analyse_wer_disparity(
        corpus, tr.hypotheses, tr.failed, normalizer=t.normalizer,
        categories=list(t.categories) if t.categories else None, covariates=list(g.covariates or []),
        n_agq=int(g.n_agq), n_resamples=int(g.n_resamples), wer_ci_resamples=int(t.wer_ci_resamples),
        seed=int(cfg.seed), confidence=float(g.confidence), rule=rule, n_jobs=int(g.n_jobs))
    log.info("levels (utterances; not compared: why):\n  %s", "\n  ".join(levels_console_lines(result.levels)))
    paths = write_wer_outputs(result, output_dir, info, settings, caveat=caveat)
    metrics = {f"wer/{r.category}/{r.group}": float(r.wer) for r in result.table2.itertuples()}
    metrics["wer/overall"] = float(result.utterances["errors"].sum() / result.utterances["ref_words"].sum())
    metrics.update({f"wer_gap/{r.category}": float(r.relative_gap) for r in result.gaps.itertuples()})
    metrics.update({f"wer_ratio/{r.category}/{r.group_a}_vs_{r.group_b}": float(r.wer_ratio)
                    for r in result.table3.itertuples()})
    run_ = start_logger_run(cfg, output_dir, job_type="wer_disparity", name=f"{info['asr']}/{info['corpus']}",
                            tags=[info["asr"], info["corpus"], "wer_disparity"])
    try:
        wandb_run.log_metrics(run_, metrics)
        wandb_run.log_table(run_, "wer/table2", result.table2)
        wandb_run.log_table(run_, "wer/table3", result.table3)
        wandb_run.log_table(run_, "wer/levels", result.levels)
        wandb_run.log_images(run_, {"wer/by_group": paths["figure"]})
    finally:
        wandb_run.finish(run_)
    log.info("WER disparity: %s on %s, overall WER %.2f%%, %d excluded; report %s", info["asr"], info["corpus"],
             100 * metrics["wer/overall"], len(result.excluded), paths["report"])
    if caveat:
        log.warning(caveat)
    return {**metrics, **counts, "n_excluded": len(result.excluded)}
