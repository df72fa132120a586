"""The one path of a SpEAT job: one read of the cache, then each (bias test, aggregation) pair computed.

``python evaluate.py 'bias_test=[a,b]' 'aggregation=[mean_sum,max_q3]'`` (or ``hydra.sweeper.params``
giving the lists, as ``experiment=paper_speat`` does) is one job. :class:`SpeatPairs` reads the
statistics of every clip of every listed test once (the cache; the extraction loop first when a clip is
not cached), then computes each pair with :class:`~speechbias.speat.results.SpeatResults` into
``<job>/<test>/<aggregation>/``: the files, rows, figures and tracker entries a one-pair job writes
(results.csv/json, layers.csv, report.md, figures, tracker_log.jsonl, config.yaml, run_digest.json),
with the job's seed, so each pair's numbers equal its one-pair job's bit for bit. The job folder gets
``pairs.csv`` (one row per pair: its folder and result row) and ``results.json`` (the same rows), written
last; ``pair_list.json`` (its current pairs) first. A rerun of a killed job skips the pairs whose folder holds their finished results
(:func:`~speechbias.tasks.run_markers.finished_results`: markers and a digest of the pair's config).
A one-pair job is a list of one computed the same way into the job's own folder (``in_job_folder``: its
writer; the entry point writes its config.yaml and run digest); it alone may run under DDP, where every rank
extracts and rank zero computes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from speechbias.aggregation import Aggregation
from speechbias.config_composition import bias_test_config
from speechbias.errors import ConfigError
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.fileio.atomic_file import atomic_write
from speechbias.report.caveat import DEMO_CAVEAT, is_demo_test
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.results.job_status import CURRENT_PAIRS_FILE
from speechbias.speat.results import SpeatResults
from speechbias.stats.associations import EqualAssociationsError
from speechbias.run_context import upstream_info
from speechbias.stimuli.bias_test import BiasTest
from speechbias.tasks.run_markers import (
    config_values,
    finished_results,
    identity_beyond_values,
    record_run_digest,
    result_rows,
    without_keys,
)

log = logging.getLogger(__name__)

# the job folder's table of its pairs (test, aggregation, folder, d, p, ...): what marks a multi-pair job
# folder for the sweep report (results/sweep_results.py reads the pairs' own folders)
PAIRS_TABLE = "pairs"


def pair_folder(job_dir: Path, test: str, aggregation: str) -> Path:
    """``<job>/<test>/<aggregation>``: one complete run folder per pair."""
    return Path(job_dir) / test / aggregation


class PairConfigs:
    """Each pair's config: the job's resolved config as the pair's one-pair job would have it (``bias_test``
    composed for the test's name, its interpolations filled from the job's paths, seed and selection;
    ``aggregation`` the pair's; the task's lists empty; the output folder the pair's).

    :meth:`pair` gives it as a plain dict (config.yaml, the tracker's run config) and as its
    :func:`~speechbias.tasks.run_markers.config_values` (the run digest's input). The job's config is
    resolved and walked once; a test's sets the keys of its bias test (resolved in the job's config:
    resolving a whole config per test cost ~20 ms) and a pair's the keys of its aggregation and folder,
    each copied along its path and walked again (a DictConfig per pair, or one per test updated in place,
    cost ~2 ms a pair). :meth:`test_config` is a test's as a DictConfig (the task's name and ``force``, for
    a rerun's check of a pair's folder).
    """

    def __init__(self, config: dict, config_dir, job_dir: Path):
        self.config = config
        self.config_dir = config_dir
        self.job_dir = Path(job_dir)
        self._job: tuple[DictConfig, dict, dict[str, str]] | None = None
        self._tests: dict[str, tuple[dict, dict[str, str]]] = {}
        self._configs: dict[str, DictConfig] = {}
        # per test: the keys a pair sets that its config has, and its values without those keys
        self._values: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {}

    def _job_config(self) -> tuple[DictConfig, dict, dict[str, str]]:
        """(the job's config as a DictConfig, resolved, its config values)."""
        if self._job is None:
            cfg = OmegaConf.create(self.config)
            plain = OmegaConf.to_container(cfg, resolve=True)
            self._job = (cfg, plain, config_values(plain))
        return self._job

    def _test(self, test: BiasTest) -> tuple[dict, dict[str, str]]:
        """(the test's config, resolved, its config values)."""
        if test.name not in self._tests:
            cfg, job, job_values = self._job_config()
            try:
                node = bias_test_config(test.name, self.config_dir) if self.config_dir else None
            except ValueError:  # a user's manifest named otherwise: the job's node names it
                node = None
            if node is None:
                resolved = job["bias_test"]
            else:
                cfg.bias_test = node  # resolved in the job's config (its paths, seed, selection)
                resolved = OmegaConf.to_container(cfg.bias_test, resolve=True)
            changes = {"bias_test": resolved}
            run = _dotted(job, "task.run")
            if isinstance(run, dict):
                changes["task.run.bias_test"] = resolved
                for key, names in (("bias_tests", "entries"), ("aggregations", "names")):
                    if isinstance(run.get(key), dict) and names in run[key]:
                        changes[f"task.run.{key}.{names}"] = []
            plain = _with_changes(job, changes)
            keys = tuple(changes)
            self._tests[test.name] = (plain, {**without_keys(job_values, keys), **config_values(plain, only=keys)})
        return self._tests[test.name]

    def test_config(self, test: BiasTest) -> DictConfig:
        """The test's config (before a pair's keys are set) as a DictConfig."""
        if test.name not in self._configs:
            self._configs[test.name] = OmegaConf.create(self._test(test)[0])
        return self._configs[test.name]

    def pair(self, test: BiasTest, aggregation: Aggregation) -> tuple[dict, dict[str, str]]:
        """(the pair's config as a dict, its config values). The dict shares with the test's what a pair
        does not set (nothing of it is changed)."""
        test_plain, test_values = self._test(test)
        folder = str(pair_folder(self.job_dir, test.name, aggregation.name))
        node = {"_target_": f"{Aggregation.__module__}.Aggregation", **aggregation.__dict__}
        changes = {"aggregation": node, "task.run.aggregation": node, "paths.output_dir": folder}
        changes["task.run.writer.output_dir"] = folder
        if test.name not in self._values:
            present = tuple(k for k in changes if _dotted(test_plain, k) is not None)
            self._values[test.name] = (present, without_keys(test_values, present))
        present, kept = self._values[test.name]
        plain = _with_changes(test_plain, {key: changes[key] for key in present})
        return plain, {**kept, **config_values(plain, only=present)}


def _dotted(plain: dict, key: str):
    """The value at the dotted ``key`` of a resolved config (None where there is none)."""
    for part in key.split("."):
        if not isinstance(plain, dict):
            return None
        plain = plain.get(part)
    return plain


def _with_changes(plain: dict, changes: dict) -> dict:
    """``plain`` with the value at each dotted key of ``changes`` set, each dict on the keys' paths copied
    (``plain`` is left as it was and shares the rest)."""
    out = dict(plain)
    for key, value in changes.items():
        *parents, last = key.split(".")
        where = out
        for part in parents:
            where[part] = dict(where[part])
            where = where[part]
        where[last] = value
    return out


class SpeatPairs:
    """Every (test, aggregation) pair of one job on one upstream.

    ``task``: the job's :class:`~speechbias.tasks.speat.SpeatTask` (upstream, cache, writer, tracker,
    settings, seed); ``tests`` x ``aggregations``: the pairs, test-major; ``in_job_folder``: a one-pair
    job, written by the job's writer into its own folder, and no job table.
    """

    def __init__(
        self, task, tests: Sequence[BiasTest], aggregations: Sequence[Aggregation], config_dir=None, in_job_folder=False
    ):
        self.task = task
        self.tests = list(tests)
        self.aggregations = list(aggregations)
        self.config_dir = config_dir
        self.in_job_folder = in_job_folder
        # per test: its pairs' run identity beyond their config values (models, manifest, clips), taken once
        self._beyond_values: dict[str, dict] = {}

    def run(self, config: dict | None, statistics_of) -> list[dict] | None:
        """Compute (or reuse) every pair; returns their result rows (test-major), None on a DDP rank other
        than zero. ``statistics_of(paths)`` gives (the statistics of ``paths`` in order, or None on such a
        rank; the number of upstream forwards it took)."""
        task = self.task
        manifests = {t.name: t.load_columns(task.clip_check) for t in self.tests}
        info = upstream_info(task.upstream, task.upstream_name)  # the manifests first: it may build the model
        paths = list(dict.fromkeys(str(p) for m in manifests.values() for p in m["path"]))
        row_of = {p: i for i, p in enumerate(paths)}
        todo = [(t, a) for t in self.tests for a in self.aggregations]
        configs = PairConfigs(config or {}, self.config_dir, task.writer.output_dir)
        rows: dict[tuple[str, str], dict] = {}
        if not self.in_job_folder:
            # the job's current pairs, before any is computed: a report counts these only (an earlier list's are stale)
            task.writer.json(CURRENT_PAIRS_FILE, {"pairs": [f"{t.name}/{a.name}" for t, a in todo]})
            rows = self._finished(todo, configs)
        missing = [(t, a) for t, a in todo if (t.name, a.name) not in rows]
        if missing:
            statistics, n_forwards = statistics_of(paths)
            if statistics is None:
                return None
            if not self.in_job_folder:
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
                run_info = {**info, "n_upstream_forwards": n_forwards}
                try:
                    rows[(test.name, aggregation.name)] = self._compute(
                        test, aggregation, manifests[test.name], statistics.rows(index), run_info, configs, config
                    )
                except Exception as exc:  # the other pairs still run, as the other jobs of a one-pair sweep do
                    if self.in_job_folder:  # the job's own error
                        raise
                    log.error("SpEAT %s on %s (%s) failed: %s", test.name, info["upstream"], aggregation.name, exc)
                    failed.append((f"{test.name}/{aggregation.name}", exc))
            if failed:  # the job is not finished: a rerun computes these pairs again, and only these
                log.error("%d of %d pair(s) failed: %s", len(failed), len(todo), ", ".join(k for k, _ in failed))
                raise failed[0][1]
        ordered = [rows[(t.name, a.name)] for t, a in todo]
        if not self.in_job_folder:
            self._write_job_summary(todo, ordered)
        return ordered

    def _finished(self, todo: list, configs: PairConfigs) -> dict[tuple[str, str], dict]:
        """The result rows of the pairs whose folders hold their finished results, by (test, aggregation)."""
        rows = {}
        for t, a in todo:
            if not self._folder(t, a).is_dir():  # nothing there yet: not finished (the usual first run)
                continue
            marker = finished_results(configs.test_config(t), self._folder(t, a), configs.pair(t, a)[1])
            if marker is not None:
                rows[(t.name, a.name)] = result_rows(marker)[0]
        return rows

    def _folder(self, test: BiasTest, aggregation: Aggregation) -> Path:
        if self.in_job_folder:
            return self.task.writer.output_dir
        return pair_folder(self.task.writer.output_dir, test.name, aggregation.name)

    def _compute(
        self,
        test: BiasTest,
        aggregation: Aggregation,
        manifest: dict[str, list[str]],
        statistics: StackedStatistics,
        run_info: dict,
        configs: PairConfigs,
        config: dict | None,
    ) -> dict:
        """One pair, as its one-pair job computes and writes it (files, tracker record, digest last)."""
        task = self.task
        folder = self._folder(test, aggregation)
        if self.in_job_folder:  # the entry point writes config.yaml and the run digest
            writer, plain, values, group = task.writer, config, None, None
        else:
            demo = is_demo_test(test.name) and not test.user_manifest
            writer = RunWriter(folder, caveat=DEMO_CAVEAT if demo else task.writer.caveat)
            folder.mkdir(parents=True, exist_ok=True)
            plain, values = configs.pair(test, aggregation)
            text = yaml.dump(plain, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)
            atomic_write(folder / "config.yaml", lambda tmp: tmp.write_text(text, encoding="utf-8"))
            group = task.writer.output_dir.parent.name  # the sweep, as for a one-pair job
        layer_convention = task.upstream.fingerprint_fields().get("layer_convention")
        results = SpeatResults(test, manifest, aggregation, writer, run_info, task.speat, task.seed, layer_convention)
        with defined_effect_size(test.name, run_info["upstream"], aggregation.name):
            row = results.compute(statistics)
        task.publish_pair(writer, run_info, test.name, aggregation.name, plain, group)
        if values is not None:
            if test.name not in self._beyond_values:  # the same for every pair of the test
                self._beyond_values[test.name] = identity_beyond_values(None, values, task.cache.root)
            # the pair's folder now holds its finished results
            record_run_digest(None, folder, values, self._beyond_values[test.name])
        log_result(test.name, run_info["upstream"], aggregation.name, row)
        return row

    def _write_job_summary(self, todo: list, rows: list[dict]) -> None:
        """``pairs.csv``/``pairs.json`` (one row per pair and its folder, each value as the pair's own
        results.csv/json has it), then ``results.json`` (the job's marker of a finished job: the same rows),
        through the job's writer."""
        job = self.task.writer
        table = [{"pair_dir": f"{t.name}/{a.name}", **r} for (t, a), r in zip(todo, rows)]
        job.table(PAIRS_TABLE, table)
        columns = {k for r in table for k in r}
        shown = [c for c in ("pair_dir", "test", "aggregation", "d", "p", "n_permutations") if c in columns]
        job.report(
            f"SpEAT job: {len(rows)} pairs",
            [
                (
                    "Pairs (each folder is a complete run: results, layers, report.md)",
                    markdown_table([{c: r.get(c) for c in shown} for r in table]),
                )
            ],
        )
        job.json("results.json", [dict(r, pair_dir=f"{t.name}/{a.name}") for (t, a), r in zip(todo, rows)])


@contextmanager
def defined_effect_size(test: str, upstream: str, aggregation: str) -> Iterator[None]:
    """A pair whose target clips all have the same association (the statistics' EqualAssociationsError: d
    undefined, e.g. clips that differ in audio but not in what the upstream gives them) as one user line
    naming the test, the upstream and the aggregation."""
    try:
        yield
    except EqualAssociationsError as exc:
        raise ConfigError(
            f"bias_test={test} upstream={upstream} aggregation={aggregation}: the effect size d is undefined: "
            "every target clip (X and Y) has the same association with A vs B (their standard deviation is 0; "
            "e.g. the X and Y clips, or the A and B clips, give the same embeddings); check the clips, or use "
            "another upstream or aggregation"
        ) from exc


def log_result(test: str, upstream: str, aggregation: str, row: dict) -> None:
    """The one console line of a computed pair: ``SpEAT <test> on <upstream> (<aggregation>): d=... p=...``."""
    log.info("SpEAT %s on %s (%s): d=%.3f p=%.4g", test, upstream, aggregation, row["d"], row["p"])
