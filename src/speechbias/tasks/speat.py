"""Task ``speat``: one upstream x one bias test x one aggregation -> d, p, report; or, given lists
(``bias_test=[a,b]``, ``aggregation=[mean_sum,max_q3]``), every pair from one read of the cache
(one run folder per pair).

conf/task/speat.yaml builds :class:`SpeatTask` with its collaborators. Every job takes one path
(:class:`~speechbias.tasks.speat_pairs.SpeatPairs`; a one-pair job is a list of one written in the job's
own folder): the statistics of its clips, extracted first where the cache lacks them (the extraction
loop, on every rank under DDP), then each pair computed from them on global rank zero by
:class:`~speechbias.speat.results.SpeatResults`, which writes results.csv/json, report.md and figures
through the pair's writer; the task then logs the writer's record to the tracker.

A warm run (every clip's statistics in the cache) of one process runs no loop: it builds no upstream (the
config's is a :class:`~speechbias.upstream.deferred.DeferredUpstream`) and no Trainer, and imports neither
Lightning nor (for a weight-free upstream) torch, nor pandas or scipy (the manifest is read as columns:
:meth:`~speechbias.stimuli.bias_test.BiasTest.load_columns`). A run of several processes (DDP, a SLURM job
of N tasks) always runs the loop, whose ranks must meet in it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from speechbias.aggregation import Aggregation
from speechbias.errors import ConfigError
from speechbias.speat.settings import SpeatSettings
from speechbias.features.cache import FeatureCache
from speechbias.features.cached_statistics import fully_cached_statistics
from speechbias.features.extraction_settings import ExtractionSettings
from speechbias.report.caveat import DEMO_CAVEAT, warn_once_per_sweep, is_demo_test
from speechbias.report.run_writer import RunWriter
from speechbias.report.tracker import Tracker
from speechbias.tasks.run_markers import finished_marker, result_rows
from speechbias.tasks.speat_pairs import SpeatPairs
from speechbias.seeding import seed_torch
from speechbias.stimuli.bias_test import BiasTest, ClipCheck
from speechbias.upstream.deferred import DeferredUpstream, built_upstream

if TYPE_CHECKING:
    import pytorch_lightning as pl

    from speechbias.upstream.base import Upstream

log = logging.getLogger(__name__)

TASK_NAME = "speat"


class SpeatTask:
    """SpEAT of one bias test on one upstream with one aggregation; or of every (test, aggregation) pair of
    the lists a job is given (``bias_tests``, ``aggregations``), one run folder per pair.

    Args:
        bias_test: the test (targets X, Y; attributes A, B); its manifest is loaded by :meth:`run`.
        upstream: the model whose states are tested (built, or a :class:`DeferredUpstream` built only
            for extraction); ``upstream_name``: its config option (``${speechbias.choice:upstream}``),
            the run's name when the upstream has no display name.
        aggregation: temporal x layer aggregation of the cached statistics.
        cache: the feature cache (a warm run performs no upstream forward).
        trainer: a factory of the extraction loop's Lightning Trainer, called with ``callbacks=``.
        writer: the run folder's writer; a demo test's run gets the demo caveat.
        tracker: where the writer's record is logged at the end (W&B, or nothing).
        speat: what is computed (permutations, per-layer d, bootstrap SE curve).
        extraction: the extraction loop's settings (``extraction.*``).
        bias_tests / aggregations: the options given as lists (``${speechbias.listed_options:...}``);
            when either is not empty the job computes every pair of ``bias_tests or [bias_test]`` x
            ``aggregations or [aggregation]`` (:class:`~speechbias.tasks.speat_pairs.SpeatPairs`);
            ``config_dir``: the folder of ``bias_test/`` (each pair's config is composed from it).
        seed: permutations and resamples (and torch's generator, seeded before extraction: the entry
            point leaves it to this task, :attr:`seeds_torch_when_needed`); force: rerun even when
            results.json exists.
        clip_check: how a bias test's manifest built in the run has its clips checked (the pre-run
            check's settings: :class:`~speechbias.stimuli.bias_test.ClipCheck`; None: not checked).
    """

    seeds_torch_when_needed = True

    def __init__(
        self,
        bias_test: BiasTest,
        upstream: Upstream | DeferredUpstream,
        aggregation: Aggregation,
        cache: FeatureCache,
        trainer: Callable[..., pl.Trainer],
        writer: RunWriter,
        tracker: Tracker,
        speat: SpeatSettings | None = None,
        upstream_name: str | None = None,
        extraction: ExtractionSettings | None = None,
        seed: int = 0,
        force: bool = False,
        bias_tests: Sequence[BiasTest] = (),
        aggregations: Sequence[Aggregation] = (),
        config_dir: str | None = None,
        clip_check: ClipCheck | None = None,
    ):
        self.bias_test = bias_test
        self.upstream = upstream
        self.upstream_name = upstream_name or None
        self.aggregation = aggregation
        self.cache = cache
        self.trainer = trainer
        self.writer = writer
        self.tracker = tracker
        self.speat = speat or SpeatSettings()
        self.extraction = extraction or ExtractionSettings()
        self.seed = int(seed)
        self.force = bool(force)
        self.bias_tests = list(bias_tests or ())
        self.aggregations = list(aggregations or ())
        self.config_dir = config_dir
        self.clip_check = clip_check
        self.demo = is_demo_test(bias_test.name) and not bias_test.user_manifest  # a user's manifest is no demo
        if self.writer.caveat is None and self.demo:
            self.writer.caveat = DEMO_CAVEAT

    def run(self, config: dict | None = None) -> dict:
        """Extract (cached), compute and write SpEAT; returns the result row (``d``, ``p``, ...) of a
        one-pair job, ``{"n_pairs": ...}`` of a list job, {} on a DDP rank other than zero. ``config``:
        the run's resolved config, the tracker's run config. A finished run is read back."""
        tests = self.bias_tests or [self.bias_test]
        aggregations = self.aggregations or [self.aggregation]
        listed = bool(self.bias_tests or self.aggregations)
        if listed and not single_process(self.trainer):
            lists = " ".join(
                f"{k}=[{','.join(n)}]"
                for k, n in (("bias_test", [t.name for t in tests]), ("aggregation", [a.name for a in aggregations]))
                if len(n) > 1
            )
            raise ConfigError(
                f"{lists}: a job of several pairs runs in one process (it reads the cache once); "
                "give it one trainer device (trainer=cpu or trainer=gpu), or run one pair per DDP job"
            )
        done = finished_marker(TASK_NAME, self.writer.output_dir, self.force)
        if done is not None:
            rows = result_rows(done)
            return {"n_pairs": len(rows)} if listed else rows[0]
        pairs = SpeatPairs(self, tests, aggregations, self.config_dir, in_job_folder=not listed)
        rows = pairs.run(config, self._statistics)
        if rows is None:  # a DDP rank other than zero: rank zero computes and writes
            return {}
        if any(is_demo_test(t.name) and not t.user_manifest for t in tests):
            warn_once_per_sweep(log, DEMO_CAVEAT, self.writer.output_dir)
        return {"n_pairs": len(rows)} if listed else rows[0]

    def publish_pair(
        self, writer: RunWriter, info: dict, test: str, aggregation: str, config: dict | None, group: str | None = None
    ) -> None:
        """Log one pair's run folder (``writer``'s record) to the tracker: one run named
        ``<upstream>/<test>/<aggregation>``, tagged with them (a one-pair job, or each pair of a list job)."""
        self.tracker.publish(
            writer,
            job_type=TASK_NAME,
            name=f"{info['upstream']}/{test}/{aggregation}",
            config=config,
            group=group,
            tags=[info["upstream"], info["family"], test, aggregation],
        )

    def _statistics(self, paths: list[str]):
        """(the statistics of ``paths`` in order, the upstream forwards this took, over every rank): in one
        process whose clips are all cached, the cache alone; else the extraction loop (no callback; every
        rank meets in it) first, the statistics then stacked on global rank zero only (None elsewhere)."""
        statistics = (
            fully_cached_statistics(paths, self.cache, self.upstream.fingerprint)
            if single_process(self.trainer)
            else None
        )
        if statistics is not None:
            log.info("%s: 0 of %d clips needed an upstream forward (every clip cached)", self.upstream.name, len(paths))
            return statistics, 0
        from speechbias.features.extraction import extract_statistics

        seed_torch(self.seed)
        upstream = built_upstream(self.upstream)
        trainer = self.trainer(callbacks=[])
        return extract_statistics(upstream, paths, self.cache, trainer, every_rank=False, **self.extraction.kwargs())


# trainer strategies that run one process (anything else may start or join other ranks)
SINGLE_PROCESS_STRATEGIES = (None, "auto", "single_device")


def single_process(trainer_factory: Callable) -> bool:
    """Whether the Trainer that ``trainer_factory`` (a ``functools.partial`` of the trainer config) would
    build runs in this process alone: one device, one node, a single-device strategy, and no launcher
    that started other ranks (``WORLD_SIZE`` > 1). Anything it cannot tell counts as several processes."""
    if not isinstance(trainer_factory, functools.partial):
        return False
    options = trainer_factory.keywords
    devices, nodes, strategy = options.get("devices", 1), options.get("num_nodes", 1), options.get("strategy")
    one_device = devices in (1, "1") or (isinstance(devices, (list, tuple)) and len(devices) == 1)
    if not (one_device and nodes in (1, "1", None) and (strategy in SINGLE_PROCESS_STRATEGIES)):
        return False
    return int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1
