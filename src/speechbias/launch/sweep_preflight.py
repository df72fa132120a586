"""A sweep's pre-flight: its inputs checked once, before any job is launched.

:class:`SweepPreflightCallback` (``hydra.callbacks.preflight`` of the entry configs) runs when a
multirun starts. It expands the sweep into its points as Hydra's basic sweeper does (command-line
sweeps and ``hydra.sweeper.params``), drops the keys that name no input (:data:`NO_INPUT_KEYS`:
aggregation, statistics settings, seeds, ...), composes each remaining distinct point as its job will
get it, and checks it with the checks of a single run (:func:`speechbias.launch.config_checks.check_config`:
corpus folders, manifests and their clips, writable folders) plus the files of each distinct model
(:mod:`speechbias.launch.model_files_check`: its config and weights, a random control's config, in the
local folder or cache, nothing loaded), all missing models named in one line. Each
distinct cause prints one line (``error: ...``); then the command exits 1 and nothing is launched. Each
value the sweep gives a no-input setting (``speat.n_permutations=-5,10``) is composed once on the first
point and its type and range checked (:func:`speechbias.launch.config_checks.check_values`).
``hydra.callbacks.preflight.enabled=false`` launches anyway (each job then fails with its own line).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections import Counter

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from speechbias.errors import find_user_error, message_line
from speechbias.result_neutral_keys import no_input_keys

# sweep keys that name no input (no model, corpus or manifest): points differing only in them are composed once
NO_INPUT_KEYS = no_input_keys()
GO_ON = "hydra.callbacks.preflight.enabled=false"


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _names_input(override: str) -> bool:
    key = _key(override)
    return not any(key == k or key.startswith(k + ".") for k in NO_INPUT_KEYS)


def jobs_per_point(config: DictConfig) -> Counter[tuple[str, ...]]:
    """Each distinct point of the sweep (its overrides, keys of :data:`NO_INPUT_KEYS` left out; in order) ->
    how many of its jobs it stands for."""
    return Counter(tuple(o for o in job if _names_input(o)) for job in sweep_jobs(config))


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Every job of the sweep (its overrides), as Hydra's basic sweeper expands it: the product of each
    override's values (a sweep's through the public ``Override.sweep_string_iterator``), a key given twice
    taking its last value."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    arguments = list(OmegaConf.to_container(config.hydra.overrides.task, resolve=False) or [])
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + arguments
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(arguments)
    values: dict[str, list[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override() and not override.is_discrete_sweep():
            raise HydraException(f"{override.input_line}: the basic sweeper takes discrete sweeps only")
        if override.is_sweep_override():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
    return [list(point) for point in itertools.product(*values.values())]


def value_overrides(config: DictConfig, loader) -> list[str]:
    """Each distinct override of the sweep whose key names no input (what :func:`jobs_per_point` leaves out),
    config group choices excepted (``aggregation=max_q3``: an option's own values)."""
    found = dict.fromkeys(o for job in sweep_jobs(config) for o in job if not _names_input(o))
    groups = set(loader.list_groups(""))
    return [o for o in found if _key(o) not in groups]


def _problem(check, *args) -> str | None:
    """The one-line message of the user error ``check(*args)`` raises (None when it passes)."""
    try:
        check(*args)
    except Exception as exc:  # noqa: BLE001 - only user errors are a cause; anything else is the job's to report
        user = find_user_error(exc)
        if user is None:
            return None
        return message_line(user)
    return None


def preflight_problems(config: DictConfig) -> list[str]:
    """One line per distinct cause that would make jobs of this sweep fail (empty: launch): inputs and
    weights in one pass; the points that one missing folder stops share its line (:func:`merged`), and
    every missing model is named in one line with one command that downloads them all."""
    from hydra.core.global_hydra import GlobalHydra
    from rich.console import Console
    from rich.progress import track

    from speechbias.launch.config_checks import check_config, check_values
    from speechbias.launch.model_files_check import needed_models
    from speechbias.model_loading import MissingWeightsError, hub_offline

    loader = GlobalHydra.instance().config_loader()
    problems: dict[str, None] = {}
    models_seen: set = set()
    missing_models: dict[str, None] = {}
    jobs_alike = jobs_per_point(config)
    points = [list(p) for p in jobs_alike]
    progress = Console(stderr=True)
    composed: list[tuple[DictConfig, int]] = []
    # a bar on a terminal only: a log gets no blank line
    for point in track(points, "sweep pre-flight", console=progress, transient=True, disable=not progress.is_terminal):
        job = loader.load_sweep_config(config, point)
        problem = _problem(check_config, job, False)  # the models below: all of the sweep's in one line
        if problem:
            problems[problem] = None
        else:
            composed.append((job, jobs_alike[tuple(point)]))
        for model in needed_models(job):
            if model not in models_seen:
                models_seen.add(model)
                try:
                    model.check()
                except MissingWeightsError:
                    missing_models[model.model_id] = None
    # each value the sweep gives a setting that names no input (speat.*, lr, seed, ...): its type and range,
    # composed once per value on the first point (no file read; a group option such as aggregation=max_q3
    # is a config file's values, checked by tests/cli/test_every_config_leaf.py)
    for override in value_overrides(config, loader):
        problem = _problem(check_values, loader.load_sweep_config(config, [*(points[0] if points else []), override]))
        if problem:
            problems[problem] = None
    if not problems and OmegaConf.select(config, "hydra.callbacks.storage_check.enabled", default=True):
        problem = _problem(_check_sweep_space, composed, config)
        if problem:
            problems[problem] = None
    lines = merged(list(problems))
    if missing_models:
        ids = list(missing_models)
        where = "offline (HF_HUB_OFFLINE=1)" if hub_offline() else "from the hub or the local cache"
        get = f"hf download {ids[0]}" if len(ids) == 1 else f"for m in {' '.join(ids)}; do hf download $m; done"
        lines.append(
            f"{len(ids)} model(s) cannot be loaded {where}: {', '.join(ids)}; download them once while "
            f"online ({get}), or point HF_HOME at a Hugging Face cache that holds them"
        )
    return lines


def _check_sweep_space(jobs: list[tuple[DictConfig, int]], config: DictConfig) -> None:
    """:class:`~speechbias.errors.StorageError` when what the sweep's jobs will write (its folder: every
    job's files; the feature cache: each upstream's clips not cached yet) does not fit on its disks."""
    from speechbias.launch.storage_check import check_free_space, sweep_needs

    sweep_dir = OmegaConf.select(config, "hydra.sweep.dir", default=None)
    if sweep_dir and jobs:
        check_free_space(sweep_needs(jobs, sweep_dir), what="this sweep")


def merged(problems: list[str]) -> list[str]:
    """``problems`` with the lines of one cause reported for several sweep points made one: lines
    ``<cause>; <key>=<value> ...; <fix>`` (the fix may hold '; ') that share their cause and fix become
    ``<cause>; needed by <key>=<a>, <key>=<b>; <fix>`` (e.g. one missing ``paths.data_root`` for every
    test of a sweep)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for line in problems:
        parts = line.split("; ")
        key = (parts[0], "; ".join(parts[2:])) if len(parts) >= 3 else (line, "")
        groups.setdefault(key, []).append(line)
    out = []
    for (cause, fix), lines in groups.items():
        if len(lines) == 1:
            out.append(lines[0])
            continue
        needed_by = ", ".join(dict.fromkeys(line.split("; ")[1].split(" ")[0] for line in lines))
        out.append(f"{cause}; needed by {needed_by}; {fix}")
    return out


class SweepPreflightCallback(Callback):
    """See the module docstring. ``enabled``: false launches the sweep without the checks."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if not self.enabled:
            return
        started = time.monotonic()
        problems = preflight_problems(config)
        if not problems:
            return
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(
            f"sweep not launched: {len(problems)} problem(s) found in {time.monotonic() - started:.1f} s before "
            f"any job started; fix them, or launch anyway with {GO_ON}",
            file=sys.stderr,
        )
        sys.exit(1)
