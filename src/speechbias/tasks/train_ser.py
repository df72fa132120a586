"""Task ``train_ser`` (``python train.py``): valence heads on one upstream, then bias propagation.

``lr=1e-4`` trains one head; ``lr=[1e-3,1e-4,1e-5]`` trains the paper's three heads together in one
run (same initial weights and batches as three separate runs; about 3x less time on CPU) and adds
the pooled propagation figure.

Compose -> instantiate (valence set, bias tests, upstream, head, trainer) -> extraction predict
loop over the training clips and every bias-test clip (cached; a warm run does no forward) ->
fit on cached per-layer temporal means (best/last checkpoints, resume) -> the propagation
callback writes results.csv/json, predictions.csv, report.md, figures and logs to W&B.
"""

from __future__ import annotations

import gc
import logging
from functools import partial
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from pytorch_lightning.utilities import rank_zero_only

from speechbias.callbacks.propagation import (PropagationCallback, PropagationTest, log_propagation_to_wandb,
                                              read_run_tables, summary_metrics)
from speechbias.features.cache import FeatureCache
from speechbias.features.extraction import extract_statistics
from speechbias.report import wandb_run
from speechbias.report.caveat import DEMO_CAVEAT
from speechbias.run_context import config_choice, start_logger_run, upstream_info
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.fit import fit_trainer, fit_valence_head
from speechbias.ser.module import as_learning_rates
from speechbias.ser.pooling import lr_label
from speechbias.ser.split import dev_split

log = logging.getLogger(__name__)


def config_dir(cfg: DictConfig) -> Path:
    """The primary config folder (``conf/``) of this run."""
    sources = None
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            sources = HydraConfig.get().runtime.config_sources
    except (ImportError, ValueError):
        pass
    if sources is None:
        sources = OmegaConf.select(cfg, "hydra.runtime.config_sources", default=None) or []
    for s in sources:
        if s.get("provider") == "main" and s.get("schema") == "file":
            return Path(s.get("path"))
    return Path(cfg.paths.root_dir) / "conf"


def load_propagation_tests(cfg: DictConfig) -> list[PropagationTest]:
    """``cfg.bias_tests``: names of ``conf/bias_test/<name>.yaml`` files (or inline BiasTest configs)."""
    entries = cfg.get("bias_tests") or []
    if not isinstance(entries, (list, ListConfig)):
        raise ValueError(f"bias_tests must be a list of bias test names, got {entries!r}")
    folder = config_dir(cfg) / "bias_test"
    tests = []
    for entry in entries:
        if isinstance(entry, str):
            path = folder / f"{entry}.yaml"
            if not path.is_file():
                known = sorted(p.stem for p in folder.glob("*.yaml"))
                raise ValueError(f"bias_tests: no bias test {entry!r} ({path} does not exist); known: {known}")
            node = OmegaConf.load(path)
        else:
            node = entry
        # resolve ${paths.*} in the bias test config against this run's paths
        scoped = OmegaConf.merge({"paths": cfg.paths}, {"bias_test": node})
        bias_test = hydra.utils.instantiate(scoped.bias_test)
        tests.append(PropagationTest(bias_test=bias_test, manifest=bias_test.load()))
    names = [t.name for t in tests]
    if len(set(names)) != len(names):
        raise ValueError(f"bias_tests lists a test twice: {names}")
    return tests


def run(cfg: DictConfig, output_dir: Path) -> dict:
    output_dir = Path(output_dir)
    done = output_dir / "results.json"
    if done.is_file() and not cfg.get("force", False):
        log.info("results already exist in %s; skipping (force=true reruns)", output_dir)
        return summary_from_results(output_dir)
    if cfg.get("torch_threads"):
        torch.set_num_threads(int(cfg.torch_threads))
    valence = hydra.utils.instantiate(cfg.ser_data.source)
    tests = load_propagation_tests(cfg)
    upstream = hydra.utils.instantiate(cfg.upstream)
    info = upstream_info(upstream, config_choice(cfg, "upstream"))
    fingerprint = upstream.fingerprint
    cache = FeatureCache(cfg.paths.cache_dir)
    lrs = as_learning_rates(OmegaConf.to_object(cfg.lr) if isinstance(cfg.lr, ListConfig) else cfg.lr)
    lr_text = ",".join(lr_label(v) for v in lrs)
    run_info = {**info, "lr": lrs[0] if len(lrs) == 1 else lr_text, "seed": int(cfg.seed),
                "ser_data": valence.name, "max_steps": int(cfg.max_steps)}
    run_ = start_logger_run(cfg, output_dir, job_type="train_ser",
                            name=f"{info['upstream']}/valence/lr={lr_text}",
                            tags=[info["upstream"], info["family"], "ser", valence.name]) \
        if rank_zero_only.rank == 0 else None
    callback = PropagationCallback(
        tests=tests, cache=cache, fingerprint=fingerprint, output_dir=output_dir, run_info=run_info,
        aggregation=hydra.utils.instantiate(cfg.propagation.aggregation),
        speat_results=cfg.propagation.get("speat_results"), synthetic=valence.synthetic, wandb_run=run_)
    checkpoint_dir = output_dir / "checkpoints"
    trainer = fit_trainer(hydra.utils.instantiate(cfg.trainer), checkpoint_dir,
                          max_steps=int(cfg.max_steps), val_every_n_epochs=int(cfg.ser_data.val_every_n_epochs),
                          checkpoint_every_n_epochs=int(cfg.get("checkpoint_every_n_epochs", 1)),
                          callbacks=[callback], **lightning_logger(cfg, output_dir))
    try:
        train_paths = list(valence.table["path"])
        seen = set(train_paths)
        extra = [p for t in tests for p in t.manifest["path"] if not (p in seen or seen.add(p))]
        stats, n_forward = extract_statistics(
            upstream, train_paths + extra, cache, trainer, batch_size=cfg.extraction.batch_size,
            num_workers=cfg.extraction.num_workers, pad_short=cfg.extraction.pad_short)
        means = stats.mean[: len(train_paths)]
        del upstream, stats
        gc.collect()
        dev = dev_split(valence.table["speaker"], fraction=float(cfg.ser_data.dev_fraction),
                        seed=int(cfg.ser_data.split_seed), speaker_disjoint=bool(cfg.ser_data.speaker_disjoint))
        datamodule = LayerMeansDataModule(means, valence.scaled, dev, batch_size=int(cfg.ser_data.batch_size),
                                          seed=int(cfg.seed), num_workers=int(cfg.ser_data.get("num_workers", 0)),
                                          steps_per_call=int(cfg.get("steps_per_call", 1)))
        callback.run_info.update({"n_train": int((~dev).sum()), "n_dev": int(dev.sum())})
        module = hydra.utils.instantiate(cfg.downstream, num_layers=means.shape[1], input_size=means.shape[2],
                                         lr=list(lrs) if len(lrs) > 1 else lrs[0],
                                         valence_range=[valence.low, valence.high],
                                         _convert_="all")
        if cfg.get("fit_threads"):
            torch.set_num_threads(int(cfg.fit_threads))
        fit_valence_head(trainer, module, datamodule, checkpoint_dir)
        if callback.summary is None and done.is_file():  # the callback ran in a spawned worker
            log_propagation_to_wandb(run_, output_dir)
    finally:
        wandb_run.finish(run_)
    summary = dict(callback.summary or (summary_from_results(output_dir) if done.is_file() else {}))
    summary["n_upstream_forwards"] = n_forward
    for key, value in summary.items():
        log.info("%s = %s", key, value)
    if valence.synthetic or any(t.name.startswith("demo") for t in tests):
        log.warning(DEMO_CAVEAT)
    return summary


def lightning_logger(cfg: DictConfig, output_dir: Path) -> dict:
    """``logger=csv``: Lightning's CSVLogger writes every logged metric to <run>/metrics.csv."""
    if cfg.logger.get("kind") != "csv":
        return {}
    from pytorch_lightning.loggers import CSVLogger

    return {"logger": CSVLogger(save_dir=str(output_dir), name="", version="")}


def summary_from_results(output_dir: Path) -> dict:
    """Summary metrics of a finished run folder (its results.csv and pooled.csv)."""
    return summary_metrics(*read_run_tables(output_dir))
