"""Task ``speat``: one upstream x one bias test x one aggregation -> d, p, report.

Compose -> instantiate (bias test, upstream, aggregation, trainer) -> extraction predict loop
(cached) -> SpEAT callback writes results.csv/json, report.md, figures and logs to W&B.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
import pandas as pd
from omegaconf import DictConfig

from speechbias.callbacks.speat import SpeatCallback
from speechbias.features.cache import FeatureCache
from speechbias.features.extraction import extract_statistics
from speechbias.report import wandb_run
from speechbias.report.caveat import DEMO_CAVEAT
from speechbias.report.speat_report import is_demo_test
from speechbias.run_context import config_choice, start_logger_run, upstream_info
from speechbias.run_markers import finished_results

log = logging.getLogger(__name__)


def run(cfg: DictConfig, output_dir: Path) -> dict:
    output_dir = Path(output_dir)
    done = output_dir / "results.json"
    if finished_results(cfg, output_dir):
        return pd.read_json(done).iloc[0].to_dict()
    bias_test = hydra.utils.instantiate(cfg.bias_test)
    manifest = bias_test.load()
    upstream = hydra.utils.instantiate(cfg.upstream)
    aggregation = hydra.utils.instantiate(cfg.aggregation)
    cache = FeatureCache(cfg.paths.cache_dir)
    info = upstream_info(upstream, config_choice(cfg, "upstream"))
    run_ = start_logger_run(cfg, output_dir, job_type="speat",
                            name=f"{info['upstream']}/{bias_test.name}/{aggregation.name}",
                            tags=[info["upstream"], info["family"], bias_test.name, aggregation.name])
    callback = SpeatCallback(
        bias_test=bias_test, manifest=manifest, aggregation=aggregation, cache=cache,
        fingerprint=upstream.fingerprint, output_dir=output_dir, run_info=info,
        n_permutations=cfg.speat.n_permutations, seed=cfg.seed, per_layer=cfg.speat.per_layer,
        se_curve=cfg.speat.se_curve, n_resamples=cfg.speat.n_resamples, wandb_run=run_,
        layer_convention=upstream.fingerprint_fields().get("layer_convention"))
    trainer = hydra.utils.instantiate(cfg.trainer)(callbacks=[callback])
    try:
        extract_statistics(
            upstream, list(manifest["path"]), cache, trainer, batch_size=cfg.extraction.batch_size,
            num_workers=cfg.extraction.num_workers, pad_short=cfg.extraction.pad_short)
    finally:
        wandb_run.finish(run_)
    # under ddp_spawn the callback ran in child processes: its row is in results.json
    summary = dict(callback.summary) if callback.summary else pd.read_json(done).iloc[0].to_dict()
    if summary:
        log.info("SpEAT %s on %s (%s): d=%.3f p=%.4g", bias_test.name, info["upstream"], aggregation.name,
                 summary["d"], summary["p"])
        if is_demo_test(bias_test.name):
            log.warning(DEMO_CAVEAT)
    return summary
