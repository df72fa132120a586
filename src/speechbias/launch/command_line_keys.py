"""Keys typed on an entry point's command line, checked against the config they override before Hydra
composes: a misspelled key is one line with close matches, not Hydra's multi-line "Could not override"
with advice to add ``+``.

What is known is read from the YAML files alone (a few ms, no compose), and generously: a key is refused
only when no config of the folder could hold it:

- the top level: the primary config's own keys (``conf/<name>.yaml``), the groups of its defaults list,
  the top-level keys of every option of a group whose files are ``# @package _global_`` (``experiment``,
  ``sweep``, ``task=report``'s ``sweep_dir``) and ``hydra``;
- below a key of the primary config: that node's keys there and in those ``_global_`` files;
- below a config group (``upstream.model_id``): the keys of any option of the group at that path (and of
  the shared files an option takes ``@_here_`` through its defaults list, e.g. ``bias_test_base``). A group
  with no YAML files (``aggregation``, Hydra's ConfigStore) and a node that is not a mapping in the files
  (an interpolation, ``null``) are left to Hydra.

``+key=...``, ``++key=...``, ``~key`` and ``hydra.*`` are left alone (a ``+`` adds a key on purpose), except
what an entry point must not take silently: :data:`WRONG_ENTRY_KEYS` (train.py measures ``bias_tests=[...]``:
``bias_test=`` there, with or without ``+``, would measure the demo tests).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import yaml

from speechbias.errors import ConfigError

# (entry config, key typed) -> what to type instead: keys an entry point would otherwise accept or add (+)
# and then ignore, measuring something other than what was asked
TRAIN_TESTS = "train.py scores the tests of bias_tests=[...]: {fix}"
EVALUATE_TESTS = "evaluate.py takes bias_test=<name> or a list bias_test=[a,b] (bias_tests is train.py's): {fix}"
TRAIN_AGGREGATION = (
    "train.py compares with the SpEAT d of propagation.aggregation (temporal, layer): e.g. "
    "propagation.aggregation.temporal=max propagation.aggregation.layer=q3"
)
WRONG_ENTRY_KEYS = {
    ("train", "bias_test"): TRAIN_TESTS,
    ("evaluate", "bias_tests"): EVALUATE_TESTS,
    ("train", "aggregation"): TRAIN_AGGREGATION,
}
# libyaml's loader where PyYAML has it (read before every command; all 88 files of conf/: 7.1 vs 73 ms CPU)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ENTRY_SCRIPTS = {"evaluate": "evaluate.py", "train": "train.py"}


def _load(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _is_global(path: Path) -> bool:
    try:
        with path.open() as f:
            head = [next(f, "") for _ in range(5)]
    except OSError:
        return False
    return any(line.strip().replace(" ", "") == "#@package_global_" for line in head)


def _defaults_groups(config: dict) -> dict:
    """The config groups a defaults list chooses (``upstream: fbank``, ``override /x: y``), no ``hydra/``
    -> the option chosen (None for ``asr: null``)."""
    groups = {}
    for entry in config.get("defaults") or []:
        if isinstance(entry, dict):
            for key, option in entry.items():
                key = str(key).removeprefix("override ").strip().lstrip("/")
                group = key.split("@", 1)[0]
                if group and not group.startswith("hydra"):
                    groups[group] = option
    return groups


def _here_files(config: dict, config_dir: Path) -> list[Path]:
    """The files a group option's defaults list merges into its own node (``/g@_here_: o``, ``/g/o@_here_``)."""
    files = []
    for entry in config.get("defaults") or []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                key = str(key)
                if key.endswith("@_here_") and value is not None:
                    files.append(config_dir / key.removesuffix("@_here_").lstrip("/") / f"{value}.yaml")
        elif isinstance(entry, str) and entry.endswith("@_here_"):
            files.append(config_dir / f"{entry.removesuffix('@_here_').lstrip('/')}.yaml")
    return files


def _merge_keys(into: dict, node: dict) -> None:
    """Union of nested key trees: a key that is a mapping in every file keeps the union of its keys; one
    that is anything else in some file (a value, an interpolation, ``null``) is None: its keys are Hydra's."""
    for key, value in node.items():
        if key == "defaults":
            continue
        if isinstance(value, dict) and (key not in into or isinstance(into[key], dict)):
            _merge_keys(into.setdefault(key, {}), value)
        else:
            into[key] = None


@lru_cache(maxsize=8)
def top_keys(config_dir: str, config_name: str) -> tuple[dict, dict, dict]:
    """(key tree of the top level of ``<config_dir>/<config_name>.yaml``, what its ``_global_`` group options
    set anywhere: ``task=report``'s ``sweep_dir`` and ``task.run_dir``, the groups of its defaults list ->
    the option each chooses); the groups are top-level keys too (their own files are read by
    :func:`group_keys`, when a key below one is typed)."""
    folder = Path(config_dir)
    primary = _load(folder / f"{config_name}.yaml")
    top: dict = {"hydra": None}
    _merge_keys(top, primary)
    global_keys: dict = {}
    groups = _defaults_groups(primary)
    for group in groups:
        top.setdefault(group, None)
        for path in sorted((folder / group).glob("*.yaml")):
            if _is_global(path):
                _merge_keys(global_keys, {k: v for k, v in _load(path).items() if k != "hydra"})
    _merge_keys(top, {k: v for k, v in global_keys.items() if k not in groups})
    return top, global_keys, groups


@lru_cache(maxsize=32)
def option_trees(config_dir: str, group: str) -> dict[str, tuple[bool, dict]]:
    """Each option of config group ``group`` -> (whether its file is ``_global_``, its key tree: below the
    group, with the shared files it takes ``@_here_``; a ``_global_`` file's from the top level)."""
    folder = Path(config_dir)
    trees = {}
    for path in sorted((folder / group).glob("*.yaml")):
        option, tree = _load(path), {}
        if _is_global(path):
            _merge_keys(tree, {k: v for k, v in option.items() if k != "hydra"})
        else:
            for shared in _here_files(option, folder):
                _merge_keys(tree, _load(shared))
            _merge_keys(tree, option)
        trees[path.stem] = (_is_global(path), tree)
    return trees


@lru_cache(maxsize=32)
def group_keys(config_dir: str, config_name: str, group: str) -> dict:
    """Key tree of every (non-``_global_``) option of config group ``group``, with the shared files they take
    ``@_here_`` and what the entry config's ``_global_`` options set in it; {} when the group has no YAML
    files (the ConfigStore's)."""
    tree: dict = {}
    for is_global, option in option_trees(config_dir, group).values():
        if not is_global:
            _merge_keys(tree, option)
    if tree:
        _merge_keys(tree, top_keys(config_dir, config_name)[1].get(group) or {})
    return tree


@lru_cache(maxsize=8)
def primary_keys(config_dir: str, config_name: str) -> dict:
    """Key tree of the entry config's own file (``conf/<config_name>.yaml``), no group option's keys."""
    tree: dict = {}
    _merge_keys(tree, _load(Path(config_dir) / f"{config_name}.yaml"))
    return tree


def _holds(tree, path: Sequence[str], strict: bool = False) -> bool:
    """Whether a key tree holds ``path`` (unless ``strict``, a node that is no mapping in the files, or an
    empty one, is Hydra's: taken as holding it)."""
    for word in path:
        if not isinstance(tree, dict) or not tree:
            return not strict
        if word not in tree:
            return False
        tree = tree[word]
    return True


def _renamed(path: list[str], value: str) -> str:
    """The override of :data:`WRONG_ENTRY_KEYS`'s test keys as the other entry point spells it."""
    names = value.strip("[]")
    if path[0] == "bias_test":
        return f"bias_tests=[{names}]" if len(path) == 1 else "bias_tests=[<name>,...]"
    if path[0] == "bias_tests" and len(path) == 1:
        return f"bias_test={names}" if "," not in names else f"bias_test=[{names}]"
    return ""


def _close(word: str, candidates: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(word, sorted(candidates), n=3, cutoff=0.6)


def _unknown(key: str, value: str, entry: str, parent: str, word: str, siblings: dict) -> ConfigError:
    """``<key>=<value>: <where> has no key <word>; did you mean ...?`` (or a few of the keys there)."""
    close = _close(word, siblings)
    prefix = f"{parent}." if parent else ""
    if close:
        hint = f"did you mean {' or '.join(prefix + c for c in close)}?"
    else:
        names = sorted(n for n in siblings if not str(n).startswith("_"))
        hint = f"its keys: {', '.join(prefix + n for n in names[:10])}{', ...' if len(names) > 10 else ''}"
    where = parent or f"{entry}'s config"
    return ConfigError(f"{key}={value}: {where} has no key {word}; {hint}")


def check_keys(overrides: Sequence[str], config_dir: str | Path, config_name: str) -> list[str]:
    """:class:`ConfigError` for the first override whose key no config of ``config_dir`` holds (with close
    matches), or that :data:`WRONG_ENTRY_KEYS` names for this entry point. Returns the overrides whose key
    only some configs hold (an option of its group not chosen on the command line, a ``_global_`` option):
    :func:`check_composed_keys` tells those."""
    entry = ENTRY_SCRIPTS.get(config_name, config_name)
    folder = str(Path(config_dir).resolve())
    top, _, groups = top_keys(folder, config_name)
    chosen = dict(o.split("=", 1) for o in overrides if "=" in o and o.split("=", 1)[0] in groups)
    unsure = []
    for override in overrides:
        if override.startswith("~") or "=" not in override:
            continue
        key, value = override.split("=", 1)
        added = key.startswith("+")
        key = key.lstrip("+")
        if "@" in key or "/" in key or key.startswith("hydra"):
            continue  # a package override, a nested group (hydra/launcher): Hydra's and the option check's
        path = key.split(".")
        wrong = WRONG_ENTRY_KEYS.get((config_name, path[0]))
        if wrong is not None:
            raise ConfigError(f"{override}: {wrong.format(fix=_renamed(path, value))}")
        if added:
            continue
        if path[0] not in top:
            this_entry = {k: v for k, v in top.items() if (config_name, k) not in WRONG_ENTRY_KEYS}
            raise _unknown(key, value, entry, "", path[0], this_entry)
        node = top[path[0]]
        if path[0] in groups:
            node = group_keys(folder, config_name, path[0]) or None
        for depth, word in enumerate(path[1:], start=1):
            if not isinstance(node, dict) or not node:
                break  # not a mapping in the files (interpolation, null, ConfigStore group): Hydra decides
            if word not in node:
                raise _unknown(key, value, entry, ".".join(path[:depth]), word, node)
            node = node[word]
        if not _surely_held(folder, config_name, path, groups, chosen):
            unsure.append(override)
    return unsure


def _surely_held(folder: str, config_name: str, path: list[str], groups, chosen: dict) -> bool:
    """Whether the key ``path`` is in the composed config whatever else is chosen: the entry config's own
    file holds it, or the option of its group chosen on the command line (``chosen``; else every option)."""
    if path[0] not in groups:
        return _holds(primary_keys(folder, config_name), path)
    trees = option_trees(folder, path[0])
    if len(path) == 1 or not trees:
        return True  # an option chosen (the option check's), a ConfigStore group (Hydra's)
    if chosen.get(path[0]) not in trees and groups[path[0]] is None:
        return False  # no option by default (asr: null): one chosen by another option (task=wer_disparity), or none
    picked = [trees[chosen[path[0]]]] if chosen.get(path[0]) in trees else trees.values()
    return all(_holds(tree, path if is_global else path[1:]) for is_global, tree in picked)


def check_composed_keys(
    unsure: Sequence[str], overrides: Sequence[str], config_dir: str | Path, config_name: str
) -> None:
    """The keys of the ``unsure`` overrides (:func:`check_keys`) are in the config Hydra composes from the
    other ``overrides`` (the options chosen, an experiment's overrides applied: ~0.1 CPU-s, only for such
    keys); else :class:`ConfigError`: ``trainer.strategy=ddp: trainer=cpu has no key strategy; trainer=ddp,
    ... have it: ...``, with close matches, the other entry point that has the key, the options that do; or
    below a ``null`` node (no ``asr`` chosen) the options that choose one. A sweep is composed with the first
    value of each swept key (``trainer=cpu,gpu``: ``trainer=cpu``); a composition that fails is left to Hydra."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not unsure:
        return
    folder = str(Path(config_dir).resolve())
    try:
        with initialize_config_dir(config_dir=folder, version_base="1.3"):
            rest = [_first_value(o) for o in overrides if o not in unsure]
            cfg = compose(config_name, overrides=rest, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException):
        return
    for override in unsure:
        path = override.split("=", 1)[0].split(".")
        node, depth = cfg, 0
        while depth < len(path) and isinstance(node, DictConfig) and path[depth] in node.keys():  # ??? too
            if OmegaConf.is_interpolation(node, path[depth]) or OmegaConf.is_missing(node, path[depth]):
                break  # Hydra's to tell
            node, depth = node[path[depth]], depth + 1
        null_node = 0 < depth < len(path) and node is None
        no_group = depth == 0 and path[0] not in cfg.keys() and path[0] in top_keys(folder, config_name)[2]
        if null_node or no_group:  # asr.batch_size=2 where no asr is chosen (asr: null, or no node at all)
            raise _unchosen(override, ".".join(path[: max(depth, 1)]), folder, config_name)
        if depth < len(path) and isinstance(node, DictConfig) and path[depth] not in node.keys():
            raise _absent(override, path, depth, list(node.keys()), cfg.hydra.runtime.choices, folder, config_name)


def _first_value(override: str) -> str:
    """A sweep's override with its first value (``trainer=cpu,gpu`` -> ``trainer=cpu``); others as typed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (parsed,) = OverridesParser.create().parse_overrides([override])
        if parsed.is_sweep_override():
            return f"{parsed.get_key_element()}={next(iter(parsed.sweep_string_iterator()))}"
    except (HydraException, StopIteration, ValueError):
        pass  # a glob (needs Hydra's loader), an empty sweep: composed as typed, Hydra tells
    return override


def _unchosen(override: str, key: str, folder: str, config_name: str) -> ConfigError:
    """The :class:`ConfigError` of a typed key below a ``null`` node (``asr.batch_size=2`` where no asr is
    chosen), naming the options whose defaults list chooses one (``task=wer_disparity``)."""
    groups = top_keys(folder, config_name)[2]
    choosers = [
        f"{group}={path.stem}"
        for group in sorted(groups)
        for path in sorted((Path(folder) / group).glob("*.yaml"))
        if key in _defaults_groups(_load(path))
    ]
    fix = f"; {', '.join(choosers)} {'chooses' if len(choosers) == 1 else 'choose'} one" if choosers else ""
    if key in groups:
        fix += f"{', or' if fix else ';'} give {key}=<option>"
    where = f"no {key} is chosen" if key in groups else f"{key} is null"
    return ConfigError(f"{override}: {where} in this config{fix}")


def _absent(override: str, path: list[str], depth: int, siblings: list, choices, folder: str, config_name: str):
    """The :class:`ConfigError` of a typed key the composed config lacks (:func:`check_composed_keys`)."""
    key, value = override.split("=", 1)
    groups = top_keys(folder, config_name)[2]
    group = path[0] if path[0] in groups and depth >= 1 else None
    choice = choices.get(group) if group else None
    where = f"{group}={choice}" if choice else ".".join(path[:depth]) or f"{ENTRY_SCRIPTS[config_name]}'s config"
    prefix = ".".join(path[:depth]) + "." if depth else ""
    hints = []
    other = next((n for n in ENTRY_SCRIPTS if n != config_name), None)
    if group is None and other and _holds(primary_keys(folder, other), path, strict=True):
        hints.append(f"{key} is {ENTRY_SCRIPTS[other]}'s: python {ENTRY_SCRIPTS[other]} {override}")
    else:
        holders = [
            f"{g}={name}"
            for g in ([group] if group else sorted(groups))
            for name, (is_global, tree) in option_trees(folder, g).items()
            if name != choice
            and (is_global or g == group)
            and _holds(tree, path[1:] if g == group and not is_global else path, strict=True)
        ]
        if holders:
            shown = ", ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
            hints.append(f"{shown} {'has' if len(holders) == 1 else 'have'} it, e.g. {holders[0]} {override}")
    close = _close(path[depth], [str(k) for k in siblings if not str(k).startswith("_")])
    if close and not hints:
        hints.append(f"did you mean {' or '.join(prefix + c for c in close)}?")
    if not hints:
        hints.append(f"+{override} adds it")
    return ConfigError(f"{override}: {where} has no key {path[depth]}; {'; '.join(hints)}")
