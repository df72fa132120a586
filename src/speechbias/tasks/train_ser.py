"""Task ``train_ser`` (``python train.py``): valence heads on one upstream, then bias propagation.

``lr=1e-4`` trains one head; ``lr=[1e-3,1e-4,1e-5]`` trains the paper's three heads together in one
run (same initial weights and batches as three separate runs; about 3x less time on CPU) and adds
the pooled propagation figure.

``conf/train.yaml``'s ``task.run`` builds :class:`TrainSerTask` with its collaborators (valence set,
bias tests, upstream, cache, head and trainer factories, writer, tracker); the entry point adds its settings
groups (``TASK_SETTINGS`` of :mod:`speechbias.tasks.train_ser_checks`). :meth:`TrainSerTask.run`:
extraction predict loop over the training clips and every bias-test clip (cached; a warm run does
no forward) -> fit on cached per-layer temporal means (best/last checkpoints, resume) -> the
propagation callback writes results.csv/json, predictions.csv, report.md and figures through the
writer -> the tracker publishes the writer's record (W&B).
"""

from __future__ import annotations

import gc
import logging
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytorch_lightning as pl
import torch

from speechbias.aggregation import Aggregation
from speechbias.callbacks.propagation import PropagationCallback, PropagationTest, summary_from_results
from speechbias.features.cache import FeatureCache
from speechbias.features.extraction import extract_statistics
from speechbias.features.extraction_settings import ExtractionSettings
from speechbias.report.caveat import DEMO_CAVEAT, warn_once_per_sweep, demo_data_caveat, is_demo_test
from speechbias.report.run_writer import RunWriter
from speechbias.report.tracker import Tracker
from speechbias.run_context import upstream_info
from speechbias.tasks.run_markers import finished_marker
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.fit import fit_trainer, fit_valence_head
from speechbias.ser.module import ValenceRegressor
from speechbias.ser.pooling import lr_label
from speechbias.ser.split import dev_split
from speechbias.ser.training_settings import PropagationSettings, TrainingSettings, ValenceDataSettings
from speechbias.ser.valence import ValenceSet
from speechbias.stimuli.bias_test import BiasTest, ClipCheck
from speechbias.upstream.base import Upstream

log = logging.getLogger(__name__)

TASK_NAME = "train_ser"


#: the paper's six US tests, the ones a pre-trained model's propagation is measured on (experiment=paper_propagation)
PAPER_TESTS = "abled_disabled,european_african_american,female_male,human_synthesized,us_foreign,young_old"


def is_pretrained(fields: dict) -> bool:
    """An upstream with pre-trained weights (a hub id or a local checkpoint, not randomised): not a
    weight-free baseline, a tiny test model or a random control (``fingerprint_fields()``)."""
    return bool(fields.get("model_id")) and not fields.get("randomize", False)


def demo_data_notice(
    upstream: str, option: str | None, valence: str, test_names: Sequence[str], model_id: str | None = None
) -> str:
    """The one line a pre-trained model's run on the demo data starts with: what it trains and tests on,
    and the command that uses the paper's data instead (with ``model_id=...`` where the option takes it,
    ``upstream=hf``)."""
    model = f" model_id={shlex.quote(str(model_id))}" if model_id else ""
    return (
        f"{upstream} will train on the synthetic demo valence set (ser_data={valence}) and test "
        f"{', '.join(test_names)}: plumbing, not findings; for the paper's data: python train.py "
        f"upstream={option or upstream}{model} ser_data=mess 'bias_tests=[{PAPER_TESTS}]' paths.data_root=<corpora>"
    )


@dataclass(eq=False, repr=False)
class TrainSerTask:
    """Train valence heads on an upstream's cached per-layer means and measure bias propagation.

    Args:
        valence: the rated training clips (``ser_data.source``).
        bias_tests: the tests whose targets X, Y the trained heads score (``bias_tests``).
        upstream / upstream_name: the model and its config option name (``${speechbias.choice:upstream}``).
        cache: the feature cache.
        head: factory of the valence heads' LightningModule (``downstream``, ``_partial_``), called
            with ``num_layers``, ``input_size``, ``lr`` (a number, or a list for several heads) and
            ``valence_range``.
        trainer: factory of the Lightning trainer (``trainer``, ``_partial_``).
        writer / tracker: the run's writer and experiment tracker.
        aggregation: temporal x layer aggregation of the SpEAT d compared with (``propagation.aggregation``).
        propagation: ``propagation.*`` (an optional SpEAT results.csv to read that d from, else computed).
        training: train.py's top-level keys (``lr``: one head per rate, ``max_steps``, ``steps_per_call``,
            ``checkpoint_every_n_epochs``, ``torch_threads`` / ``fit_threads``).
        valence_data: ``ser_data.*`` (the dev split, batches, validation interval, loader workers).
        extraction: the extraction loop's settings.
        seed: the run's seed (batches; identity columns). force: rerun a finished run.
        clip_check: how a bias test's manifest built in the run has its clips checked (the pre-run
            check's settings: :class:`~speechbias.stimuli.bias_test.ClipCheck`; None: not checked).
    """

    valence: ValenceSet
    bias_tests: Sequence[BiasTest]
    upstream: Upstream | None
    cache: FeatureCache
    head: Callable[..., ValenceRegressor]
    trainer: Callable[..., pl.Trainer]
    writer: RunWriter
    tracker: Tracker
    aggregation: Aggregation
    training: TrainingSettings
    valence_data: ValenceDataSettings
    propagation: PropagationSettings = PropagationSettings()
    extraction: ExtractionSettings = ExtractionSettings()
    upstream_name: str | None = None
    seed: int = 0
    force: bool = False
    clip_check: ClipCheck | None = None

    def __post_init__(self):
        self.bias_tests = list(self.bias_tests)
        self.seed = int(self.seed)
        self.force = bool(self.force)

    def run(self, config: dict | None = None) -> dict:
        """Extract, fit, measure propagation, publish; returns the summary metrics (those of the
        finished run's tables when the run folder already holds one). ``config``: the resolved run
        config (the tracker's run config). Runs once: the upstream is released after extraction."""
        output_dir = self.writer.output_dir
        if finished_marker(TASK_NAME, output_dir, self.force) is not None:
            return summary_from_results(output_dir)
        training, data = self.training, self.valence_data
        if training.torch_threads:
            torch.set_num_threads(training.torch_threads)
        tests = [PropagationTest(bias_test=t, manifest=t.load(self.clip_check)) for t in self.bias_tests]
        info = upstream_info(self.upstream, self.upstream_name)
        lr_text = ",".join(lr_label(v) for v in training.lr)
        run_info = {
            **info,
            "lr": training.lr[0] if len(training.lr) == 1 else lr_text,
            "seed": self.seed,
            "ser_data": self.valence.name,
            "max_steps": training.max_steps,
            "valence_low": self.valence.low,
            "valence_high": self.valence.high,
        }  # the rating scale
        demo = self.valence.synthetic or any(is_demo_test(t.name) for t in tests)  # a demo set or test (demo_*)
        fields = self.upstream.fingerprint_fields()
        pretrained = is_pretrained(fields)
        if demo:
            self.writer.caveat = demo_data_caveat(info["upstream"]) if pretrained else DEMO_CAVEAT
        if demo and pretrained:
            # upstream=hf names its checkpoint on the command line (model_id=...): the command needs it too
            model_id = fields.get("model_id") if self.upstream_name == "hf" else None
            names = [t.name for t in tests]
            log.warning(demo_data_notice(info["upstream"], self.upstream_name, self.valence.name, names, model_id))
        callback = PropagationCallback(
            tests=tests,
            cache=self.cache,
            fingerprint=info["fingerprint"],
            writer=self.writer,
            run_info=run_info,
            aggregation=self.aggregation,
            speat_results=self.propagation.speat_results,
        )
        checkpoint_dir = output_dir / "checkpoints"
        trainer = fit_trainer(
            self.trainer,
            checkpoint_dir,
            max_steps=training.max_steps,
            val_every_n_epochs=data.val_every_n_epochs,
            checkpoint_every_n_epochs=training.checkpoint_every_n_epochs,
            callbacks=[callback],
            **self.tracker.lightning_logger(output_dir, job_type=TASK_NAME),
        )
        train_paths = list(self.valence.table["path"])
        seen = set(train_paths)
        extra = [p for t in tests for p in t.manifest["path"] if not (p in seen or seen.add(p))]
        stats, n_forward = extract_statistics(
            self.upstream, train_paths + extra, self.cache, trainer, **self.extraction.kwargs()
        )
        means = stats.mean[: len(train_paths)]
        row_of = {p: i for i, p in enumerate(train_paths + extra)}
        callback.statistics = {t.name: stats.rows([row_of[p] for p in t.manifest["path"]]) for t in tests}
        self.upstream = None  # the heads train on cached means: free the model's memory
        del stats
        gc.collect()
        dev = dev_split(self.valence.table["speaker"], data.dev_fraction, data.split_seed, data.speaker_disjoint)
        datamodule = LayerMeansDataModule(
            means,
            self.valence.scaled,
            dev,
            batch_size=data.batch_size,
            seed=self.seed,
            num_workers=data.num_workers,
            steps_per_call=training.steps_per_call,
        )
        callback.run_info.update({"n_train": int((~dev).sum()), "n_dev": int(dev.sum())})
        module = self.head(
            num_layers=means.shape[1],
            input_size=means.shape[2],
            lr=list(training.lr) if len(training.lr) > 1 else training.lr[0],
            valence_range=[self.valence.low, self.valence.high],
        )
        if training.fit_threads:
            torch.set_num_threads(training.fit_threads)
        fit_valence_head(trainer, module, datamodule, checkpoint_dir)
        # under ddp_spawn the callback ran in a worker: its results are in the run folder
        done = self.writer.path("results.json").is_file()
        summary = dict(callback.summary or (summary_from_results(output_dir) if done else {}))
        if trainer.is_global_zero:  # one tracker run, not one per DDP rank
            self.tracker.publish(
                self.writer,
                job_type=TASK_NAME,
                name=f"{info['upstream']}/valence/lr={lr_text}",
                tags=[info["upstream"], info["family"], "ser", self.valence.name],
                config=config,
            )
        summary["n_upstream_forwards"] = n_forward
        for key, value in summary.items():
            log.info("%s = %s", key, console_value(value))
        if demo:
            warn_once_per_sweep(log, self.writer.caveat, self.writer.output_dir)
        return summary


def console_value(value):
    """A summary value as the console shows it: floats to 4 significant digits (``0.8552``), the rest as
    they are; the files keep full precision."""
    return f"{value:.4g}" if isinstance(value, float) else value
