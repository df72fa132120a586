"""Which jobs of a sweep need no model forward, so SLURM need not give them a GPU.

A job is statistics-only (:meth:`ForwardNeeds.statistics_only`) when, read from its composed config:

* it is an ``evaluate.py task=speat`` job (:data:`TASKS_WARM_WITHOUT_FORWARD`) whose trainer runs one
  process (the task's own rule, :func:`speechbias.tasks.speat.single_process`: several ranks always run
  the extraction loop), and
* either every clip of its stimuli (:func:`job_stimulus_paths`) has an audio-index record and a cache
  entry for its upstream's fingerprint (:func:`speechbias.features.cached_statistics.count_uncached`, the
  rule by which the task counts what needs work), so the task takes its warm path and builds no model;
* or its upstream is weight-free (fbank, mfcc: their fingerprint follows from the config,
  :data:`speechbias.upstream.deferred.WEIGHT_FREE_TARGETS`) and its trainer runs on the CPU
  (:data:`CPU_ACCELERATORS`): extraction is a CPU computation then.

No model is built where the fingerprint follows from the config (and, for an HF upstream, its files:
:mod:`speechbias.upstream.hf_identity`), nor where a clip has no audio-index record or the first clip no entry for any upstream (a cold job, whatever
the upstream); any other upstream is built as the task builds it (an ``HFUpstream`` reads its config, not
its weights), once per distinct upstream config. Entry
files are checked for existence, not read (a warm sweep of the paper's 16 models would read gigabytes on
the submitting host); an entry found damaged in the job is recomputed there (on the CPU).
Whatever cannot be told (a manifest not built yet, an upstream that does not build, an unknown task or
bias test) counts as needing a forward: the job keeps the configured resources and reports its own error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.run_context import listed_options

log = logging.getLogger(__name__)

# tasks whose run computes from cached statistics alone when every clip is cached (tasks/speat.py's warm path)
TASKS_WARM_WITHOUT_FORWARD = ("speat",)
# trainer accelerators that run on a node without GPUs
CPU_ACCELERATORS = ("cpu", "auto")
# override keys (and what is below them) that change neither the job's stimuli, upstream, cache nor trainer:
# jobs differing only in them get one decision (the seed stays: it selects the stimuli of corpus-built tests)
DECISION_NEUTRAL_KEYS = ("aggregation", "speat", "logger", "force", "check_audio", "allow_duplicate_audio")


def job_stimulus_paths(job: DictConfig) -> list[str] | None:
    """Every clip the job reads (each of its bias tests' manifest paths, in manifest order: one test, or
    each of a list ``bias_test=[a,b]``), or None when that cannot be told without building stimuli (a
    corpus-built test whose manifest is not written yet, a bias test config of another shape). The one
    place that knows where a job's stimuli are in its config."""
    from hydra.utils import instantiate

    from speechbias.stimuli.bias_test import BiasTest
    from speechbias.tasks.speat_checks import listed_bias_tests

    paths: list[str] = []
    for _key, node in listed_bias_tests(job):
        if not isinstance(node, DictConfig) or "_target_" not in node:
            return None
        test = instantiate(node)
        if not isinstance(test, BiasTest) or test.manifest is None or not Path(test.manifest).is_file():
            return None
        paths += [str(p) for p in test.load()["path"]]
    return list(dict.fromkeys(paths)) or None


def decision_key(overrides: Sequence[str]) -> tuple[str, ...]:
    """The overrides of a job that can change its decision (:data:`DECISION_NEUTRAL_KEYS` left out)."""

    def neutral(override: str) -> bool:
        key = override.lstrip("~+").split("=", 1)[0]
        return any(key == k or key.startswith(k + ".") or key.startswith(k + "@") for k in DECISION_NEUTRAL_KEYS)

    return tuple(o for o in overrides if not neutral(o))


def _text(job: DictConfig, key: str) -> str:
    """The resolved value at ``key`` as text (a node as YAML): what a decision is remembered by."""
    value = OmegaConf.select(job, key, default=None)
    return OmegaConf.to_yaml(value, resolve=True) if OmegaConf.is_config(value) else repr(value)


class ForwardNeeds:
    """Decides, per job config, whether the job runs without a model forward; remembers each distinct
    upstream's fingerprint and each distinct (task, trainer, upstream, stimuli, cache) answer."""

    def __init__(self) -> None:
        self._fingerprints: dict[str, str | None] = {}
        self._answers: dict[tuple, bool] = {}

    def statistics_only(self, job: DictConfig) -> bool:
        """Whether ``job`` (a composed job config) needs no forward (see the module docstring)."""
        try:
            key = tuple(_text(job, k) for k in ("task.name", "trainer", "upstream", "bias_test", "task.run.cache"))
            key += (",".join(listed_options(job, "bias_test")),)  # a list's node is its tests' merge
        except Exception:  # noqa: BLE001 - a config that does not resolve: the job reports it itself
            return False
        if key not in self._answers:
            self._answers[key] = self._decide(job, key[2])
        return self._answers[key]

    def _decide(self, job: DictConfig, upstream_key: str) -> bool:
        from hydra.utils import instantiate

        from speechbias.features.cached_statistics import count_uncached, index_records
        from speechbias.tasks.speat import single_process
        from speechbias.upstream.deferred import WEIGHT_FREE_TARGETS, DeferredUpstream

        if OmegaConf.select(job, "task.name", default=None) not in TASKS_WARM_WITHOUT_FORWARD:
            return False
        try:
            if not single_process(instantiate(job.trainer)):
                return False
            cache = instantiate(job.task.run.cache)
            upstream = DeferredUpstream(job.upstream)  # from the config (and an HF model's files): no torch
            accelerator = OmegaConf.select(job, "trainer.accelerator", default=None)
            if upstream.target in WEIGHT_FREE_TARGETS and accelerator in CPU_ACCELERATORS:
                return True
            paths = job_stimulus_paths(job)
            if paths is None:
                return False
            records = index_records(paths, cache)
            if any(record is None for record in records.values()) or not cache.has_entry_for_any_upstream(
                next(iter(records.values()))[0]
            ):
                return False  # a clip never decoded, changed, or cached for no upstream: cold; nothing built
            fingerprint = self._fingerprint(upstream, upstream_key)
            if fingerprint is None:
                return False
            return count_uncached(paths, cache, fingerprint, known=records) == 0
        except Exception as exc:  # noqa: BLE001 - the job keeps the configured resources and reports it itself
            log.debug("cannot tell whether a job needs a forward (%s): configured resources", exc)
            return False

    def _fingerprint(self, upstream, key: str) -> str | None:
        if key not in self._fingerprints:
            try:
                self._fingerprints[key] = upstream.fingerprint
            except Exception as exc:  # noqa: BLE001 - e.g. missing weights: the job says so
                log.debug("upstream fingerprint unavailable (%s)", exc)
                self._fingerprints[key] = None
        return self._fingerprints[key]
