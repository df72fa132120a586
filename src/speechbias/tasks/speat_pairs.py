"""A SpEAT job of several (bias test, aggregation) pairs: one read of the cache, one run folder per pair.

``python evaluate.py 'bias_test=[a,b]' 'aggregation=[mean_sum,max_q3]'`` (or ``hydra.sweeper.params``
giving the lists, as ``experiment=paper_speat`` does) is one job. :class:`SpeatPairs` reads the
statistics of every clip of every listed test once (the cache; the extraction loop first when a clip is
not cached), then computes each pair with :class:`~speechbias.speat.results.SpeatResults` into
``<job>/<test>/<aggregation>/``: the files, rows, figures and tracker entries a one-pair job writes
(results.csv/json, layers.csv, report.md, figures, tracker_log.jsonl, config.yaml, run_digest.json),
with the job's seed, so each pair's numbers equal its one-pair job's bit for bit. The job folder gets
``pairs.csv`` (one row per pair: its folder and result row) and ``results.json`` (the same rows), written
last. A rerun of a killed job skips the pairs whose folder holds their finished results
(:func:`~speechbias.tasks.run_markers.finished_results`: markers and a digest of the pair's config).
One process only: a job of several processes (DDP) takes one pair.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from speechbias.aggregation import Aggregation
from speechbias.config_composition import bias_test_config
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.fileio.atomic_file import atomic_write
from speechbias.report.caveat import DEMO_CAVEAT, is_demo_test
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.speat.results import SpeatResults
from speechbias.stimuli.bias_test import BiasTest
from speechbias.tasks.run_markers import finished_results, record_run_digest

log = logging.getLogger(__name__)

# the job folder's table of its pairs (test, aggregation, folder, d, p, ...): what marks a multi-pair job
# folder for the sweep report (results/sweep_results.py reads the pairs' own folders)
PAIRS_TABLE = "pairs"


def pair_folder(job_dir: Path, test: str, aggregation: str) -> Path:
    """``<job>/<test>/<aggregation>``: one complete run folder per pair."""
    return Path(job_dir) / test / aggregation


def pair_config(config: dict, test: BiasTest, aggregation: Aggregation, folder: Path, config_dir) -> DictConfig:
    """The job's resolved config as the pair's one-pair job would have it: ``bias_test`` composed for
    the test's name (its interpolations filled from the job's paths, seed and selection),
    ``aggregation`` the pair's, the task's lists empty, the output folder the pair's."""
    cfg = OmegaConf.create(config)
    try:
        cfg.bias_test = bias_test_config(test.name, config_dir) if config_dir else cfg.bias_test
    except ValueError:  # a user's manifest named otherwise: the job's node names it
        pass
    cfg.aggregation = {"_target_": f"{Aggregation.__module__}.Aggregation", **aggregation.__dict__}
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    run = OmegaConf.select(cfg, "task.run", default=None)
    if run is not None:
        run.bias_test, run.aggregation = cfg.bias_test, cfg.aggregation
        for key, names in (("bias_tests", "entries"), ("aggregations", "names")):
            if OmegaConf.select(run, f"{key}.{names}", default=None) is not None:
                run[key][names] = []
        if OmegaConf.select(run, "writer.output_dir", default=None) is not None:
            run.writer.output_dir = str(folder)
    if OmegaConf.select(cfg, "paths.output_dir", default=None) is not None:
        cfg.paths.output_dir = str(folder)
    return cfg


class SpeatPairs:
    """Every (test, aggregation) pair of one job on one upstream.

    ``task``: the job's :class:`~speechbias.tasks.speat.SpeatTask` (upstream, cache, writer, tracker,
    settings, seed); ``tests`` x ``aggregations``: the pairs, test-major.
    """

    def __init__(self, task, tests: Sequence[BiasTest], aggregations: Sequence[Aggregation], config_dir=None):
        self.task = task
        self.tests = list(tests)
        self.aggregations = list(aggregations)
        self.config_dir = config_dir

    def run(self, config: dict | None, info: dict, statistics_of) -> list[dict]:
        """Compute (or reuse) every pair; returns their result rows (test-major). ``statistics_of(paths)``
        gives (the statistics of ``paths`` in order, the number of upstream forwards it took)."""
        task = self.task
        manifests = {t.name: t.load() for t in self.tests}
        paths = list(dict.fromkeys(str(p) for m in manifests.values() for p in m["path"]))
        row_of = {p: i for i, p in enumerate(paths)}
        todo = [(t, a) for t in self.tests for a in self.aggregations]
        configs = {
            (t.name, a.name): pair_config(config or {}, t, a, self._folder(t, a), self.config_dir) for t, a in todo
        }
        finished = {
            key: finished_results(cfg, pair_folder(task.writer.output_dir, *key)) for key, cfg in configs.items()
        }
        rows: dict[tuple[str, str], dict] = {}
        for key, marker in finished.items():
            if marker is not None:
                rows[key] = pd.read_json(marker).iloc[0].to_dict()
        missing = [(t, a) for t, a in todo if (t.name, a.name) not in rows]
        if missing:
            statistics, n_forwards = statistics_of(paths)
            log.info(
                "%s: statistics of %d clips read once for %d pair(s) (%d of %d already finished)",
                info["upstream"],
                len(paths),
                len(missing),
                len(todo) - len(missing),
                len(todo),
            )
            failed: list[tuple[str, Exception]] = []
            for test, aggregation in missing:
                index = [row_of[str(p)] for p in manifests[test.name]["path"]]
                try:
                    rows[(test.name, aggregation.name)] = self._compute(
                        test,
                        aggregation,
                        manifests[test.name],
                        statistics.rows(index),
                        {**info, "n_upstream_forwards": n_forwards},
                        configs[(test.name, aggregation.name)],
                    )
                except Exception as exc:  # the other pairs still run, as the other jobs of a one-pair sweep do
                    log.error("SpEAT %s on %s (%s) failed: %s", test.name, info["upstream"], aggregation.name, exc)
                    failed.append((f"{test.name}/{aggregation.name}", exc))
            if failed:  # the job is not finished: a rerun computes these pairs again, and only these
                log.error("%d of %d pair(s) failed: %s", len(failed), len(todo), ", ".join(k for k, _ in failed))
                raise failed[0][1]
        ordered = [rows[(t.name, a.name)] for t, a in todo]
        self._write_job_summary(todo, ordered)
        return ordered

    def _folder(self, test: BiasTest, aggregation: Aggregation) -> Path:
        return pair_folder(self.task.writer.output_dir, test.name, aggregation.name)

    def _compute(
        self,
        test: BiasTest,
        aggregation: Aggregation,
        manifest: pd.DataFrame,
        statistics: StackedStatistics,
        run_info: dict,
        cfg: DictConfig,
    ) -> dict:
        """One pair, as its one-pair job computes and writes it (files, tracker record, digest last)."""
        task = self.task
        folder = self._folder(test, aggregation)
        demo = is_demo_test(test.name) and not test.user_manifest
        writer = RunWriter(folder, caveat=DEMO_CAVEAT if demo else task.writer.caveat)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / "config.yaml", lambda tmp: OmegaConf.save(cfg, tmp))
        layer_convention = task.upstream.fingerprint_fields().get("layer_convention")
        results = SpeatResults(test, manifest, aggregation, writer, run_info, task.speat, task.seed, layer_convention)
        row = results.compute(statistics)
        task.tracker.publish(
            writer,
            job_type="speat",
            name=f"{run_info['upstream']}/{test.name}/{aggregation.name}",
            config=OmegaConf.to_container(cfg),
            group=task.writer.output_dir.parent.name,  # the sweep, as for a one-pair job
            tags=[run_info["upstream"], run_info["family"], test.name, aggregation.name],
        )
        log.info(
            "SpEAT %s on %s (%s): d=%.3f p=%.4g", test.name, run_info["upstream"], aggregation.name, row["d"], row["p"]
        )
        record_run_digest(cfg, folder)  # the pair's folder now holds its finished results
        return row

    def _write_job_summary(self, todo: list, rows: list[dict]) -> None:
        """``pairs.csv``/``pairs.json`` (one row per pair and its folder), then ``results.json`` (the job's
        marker of a finished job: the same rows), through the job's writer."""
        job = self.task.writer
        table = pd.DataFrame(rows)
        table.insert(0, "pair_dir", [f"{t.name}/{a.name}" for t, a in todo])
        job.table(PAIRS_TABLE, table)
        shown = [c for c in ("pair_dir", "test", "aggregation", "d", "p", "n_permutations") if c in table.columns]
        job.report(
            f"SpEAT job: {len(rows)} pairs",
            [("Pairs (each folder is a complete run: results, layers, report.md)", markdown_table(table[shown]))],
        )
        job.json("results.json", [dict(r, pair_dir=f"{t.name}/{a.name}") for (t, a), r in zip(todo, rows)])
