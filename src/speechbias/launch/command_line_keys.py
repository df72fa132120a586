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


def _defaults_groups(config: dict) -> list[str]:
    """The config groups a defaults list chooses (``upstream: fbank``, ``override /x: y``), no ``hydra/``."""
    groups = []
    for entry in config.get("defaults") or []:
        if isinstance(entry, dict):
            for key in entry:
                key = str(key).removeprefix("override ").strip().lstrip("/")
                group = key.split("@", 1)[0]
                if group and not group.startswith("hydra"):
                    groups.append(group)
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
def top_keys(config_dir: str, config_name: str) -> tuple[dict, dict, frozenset]:
    """(key tree of the top level of ``<config_dir>/<config_name>.yaml``, what its ``_global_`` group options
    set anywhere: ``task=report``'s ``sweep_dir`` and ``task.run_dir``, the groups of its defaults list); the
    groups are top-level keys too (their own files are read by :func:`group_keys`, when a key below one is
    typed)."""
    folder = Path(config_dir)
    primary = _load(folder / f"{config_name}.yaml")
    top: dict = {"hydra": None}
    _merge_keys(top, primary)
    global_keys: dict = {}
    groups = frozenset(_defaults_groups(primary))
    for group in groups:
        top.setdefault(group, None)
        for path in sorted((folder / group).glob("*.yaml")):
            if _is_global(path):
                _merge_keys(global_keys, {k: v for k, v in _load(path).items() if k != "hydra"})
    _merge_keys(top, {k: v for k, v in global_keys.items() if k not in groups})
    return top, global_keys, groups


@lru_cache(maxsize=32)
def group_keys(config_dir: str, group: str, global_keys_of_group: str) -> dict:
    """Key tree of every (non-``_global_``) option of config group ``group``, with the shared files they take
    ``@_here_`` and what ``_global_`` options set in it (``global_keys_of_group``, YAML text); {} when the
    group has no YAML files (the ConfigStore's)."""
    folder = Path(config_dir)
    tree: dict = {}
    for path in sorted((folder / group).glob("*.yaml")):
        if _is_global(path):
            continue
        option = _load(path)
        for shared in _here_files(option, folder):
            _merge_keys(tree, _load(shared))
        _merge_keys(tree, option)
    if tree:
        _merge_keys(tree, yaml.safe_load(global_keys_of_group) or {})
    return tree


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
        names = sorted(siblings)
        hint = f"its keys: {', '.join(prefix + n for n in names[:10])}{', ...' if len(names) > 10 else ''}"
    where = parent or f"{entry}'s config"
    return ConfigError(f"{key}={value}: {where} has no key {word}; {hint}")


def check_keys(overrides: Sequence[str], config_dir: str | Path, config_name: str) -> None:
    """:class:`ConfigError` for the first override whose key no config of ``config_dir`` holds (with close
    matches), or that :data:`WRONG_ENTRY_KEYS` names for this entry point."""
    entry = ENTRY_SCRIPTS.get(config_name, f"{config_name}")
    folder = str(Path(config_dir).resolve())
    top, global_keys, groups = top_keys(folder, config_name)
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
            node = group_keys(folder, path[0], yaml.safe_dump(global_keys.get(path[0]) or {})) or None
        for depth, word in enumerate(path[1:], start=1):
            if not isinstance(node, dict) or not node:
                break  # not a mapping in the files (interpolation, null, ConfigStore group): Hydra decides
            if word not in node:
                raise _unknown(key, value, entry, ".".join(path[:depth]), word, node)
            node = node[word]
