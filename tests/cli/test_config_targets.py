"""Every ``_target_`` of conf/ names an importable callable that accepts the node's keys; configs that
need no weights or data are instantiated.

Generic: the tests walk whatever conf/**/*.yaml and this project's ConfigStore nodes
(speechbias.launch.aggregation_configs) hold, so a new config file is checked the day it is added.

Signature rule: each key of a node with ``_target_`` (except Hydra's ``_target_``, ``_partial_``,
``_convert_``, ``_recursive_``, ``_args_``) must be a keyword parameter of the target. ``**kwargs``
accepts everything, except where this project's code says where they go: an alternate constructor
(a classmethod such as ``HFUpstream.from_config_dict``) passes them to its class, and a subclass
``__init__(..., **kwargs)`` to the ``__init__`` of its speechbias base class; the keys are then checked
there too.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Iterator
from pathlib import Path

import hydra
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf, open_dict

from speechbias.launch.aggregation_configs import PROVIDER

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
HYDRA_KEYS = {"_target_", "_partial_", "_convert_", "_recursive_", "_args_"}
MISSING = "???"


# --- finding target nodes -----------------------------------------------------------------------


def target_nodes(node, path: str = "") -> Iterator[tuple[str, dict]]:
    """``(dotted path, node)`` of every mapping with a ``_target_`` in a plain container, outer first."""
    if isinstance(node, dict):
        if "_target_" in node:
            yield path or "<root>", node
        for key, value in node.items():
            yield from target_nodes(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from target_nodes(value, f"{path}[{i}]")


def store_nodes() -> dict[str, dict]:
    """This project's ConfigStore nodes as plain containers, by ``ConfigStore:<group>/<name>``."""
    out = {}

    def visit(tree: dict, prefix: str) -> None:
        for name, entry in tree.items():
            if isinstance(entry, dict):
                visit(entry, f"{prefix}{name}/")
            elif entry.provider == PROVIDER:
                out[f"ConfigStore:{prefix}{name.removesuffix('.yaml')}"] = OmegaConf.to_container(entry.node)

    visit(ConfigStore.instance().repo, "")
    return out


def config_sources() -> dict[str, dict]:
    """Every config holding a ``_target_``: ``conf/<path>.yaml`` files and ConfigStore nodes (unresolved)."""
    out = {}
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        out[f"conf/{path.relative_to(CONF_DIR)}"] = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    out.update(store_nodes())
    return {name: node for name, node in out.items() if any(target_nodes(node))}


# --- the signature check ------------------------------------------------------------------------


def accepted_keywords(obj) -> tuple[set[str], bool, str]:
    """``(keyword names, accepts any keyword, description)`` of calling ``obj`` (rules: module docstring)."""
    sig = inspect.signature(obj)
    names = {n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    described = f"{getattr(obj, '__qualname__', obj)}{sig}"
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return names, False, described
    forwarded_to = None
    if inspect.ismethod(obj) and inspect.isclass(obj.__self__):  # alternate constructor: cls(..., **kwargs)
        forwarded_to = obj.__self__
    elif inspect.isclass(obj):  # __init__(..., **kwargs) -> super().__init__(**kwargs)
        forwarded_to = next((base for base in obj.__mro__[1:] if base.__init__ is not obj.__init__), None)
        if forwarded_to is not None and not forwarded_to.__module__.startswith("speechbias."):
            forwarded_to = None
    if forwarded_to is None:
        return names, True, described
    inner, any_keyword, inner_described = accepted_keywords(forwarded_to)
    return names | inner, any_keyword, f"{described}, **kwargs -> {inner_described}"


def signature_errors(node: dict, path: str) -> list[str]:
    target = node["_target_"]
    try:
        obj = hydra.utils.get_object(target)
    except Exception as exc:  # the message names what failed to import
        return [f"{path}: _target_ {target} cannot be imported: {type(exc).__name__}: {exc}"]
    names, any_keyword, described = accepted_keywords(obj)
    if any_keyword:
        return []
    return [
        f"{path}: key {key!r} is not a parameter of {target}: {described}"
        for key in node
        if key not in HYDRA_KEYS and key not in names
    ]


SOURCES = config_sources()


def test_the_walk_finds_the_targets_of_every_kind_of_config():
    assert len(SOURCES) >= 30
    assert {"conf/upstream/fbank.yaml", "conf/evaluate.yaml", "ConfigStore:aggregation/mean_sum"} <= set(SOURCES)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_target_accepts_the_keys_of_its_node(source):
    errors = [e for path, node in target_nodes(SOURCES[source]) for e in signature_errors(node, path)]
    assert not errors, f"{source}:\n  " + "\n  ".join(errors)


# --- instantiating what can be built here --------------------------------------------------------

# group -> the entry config that has it in its defaults list
GROUPS = {
    "upstream": "evaluate",
    "asr": "evaluate",
    "sllm": "evaluate",
    "trainer": "evaluate",
    "logger": "evaluate",
    "aggregation": "evaluate",
    "bias_test": "evaluate",
    "corpus": "evaluate",
    "downstream": "train",
    "ser_data": "train",
}
# options that must build here by their name: tiny / random models, weight-free baselines, demo data,
# scripted policies, the CPU trainer
OFFLINE_NAMES = ("tiny_", "random_", "demo", "fbank", "mfcc", "cpu", "policy")


def why_not_offline(group_node: dict) -> str | None:
    """Why an option's config (unresolved) cannot be built here, or None.

    A target node naming a ``model_id`` (hub or local checkpoint weights), one that still has a required
    ``???`` value, a non-partial one that reads a corpus under ``paths.data_root`` when built, and a GPU
    ``accelerator`` without CUDA. A ``_partial_`` node (e.g. a bias test's builder) reads nothing when built.
    """
    for path, node in target_nodes(group_node):
        if "model_id" in node:
            return f"{path}: model_id (weights)"
        if node.get("accelerator", "cpu") != "cpu" and not torch.cuda.is_available():
            return f"{path}: accelerator {node['accelerator']} without CUDA"
        if node.get("_partial_"):
            continue
        values = [v for k, v in node.items() if k not in HYDRA_KEYS and not isinstance(v, (dict, list))]
        if MISSING in values:
            return f"{path}: a required ??? value"
        if any(isinstance(v, str) and "paths.data_root" in v for v in values):
            return f"{path}: reads data under paths.data_root"
    return None


def outermost_targets(node, path: str = "") -> Iterator[str]:
    """Dotted paths of the target nodes not inside another one (those build their inner nodes)."""
    if isinstance(node, dict):
        if "_target_" in node:
            yield path
            return
        for key, value in node.items():
            yield from outermost_targets(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from outermost_targets(value, f"{path}[{i}]")


def build(node):
    """``hydra.utils.instantiate(node)``; a partial whose target needs no more arguments (a trainer
    factory) is called too, so the object itself is built."""
    built = hydra.utils.instantiate(node)
    if isinstance(built, functools.partial):
        try:
            inspect.signature(built.func).bind(*built.args, **built.keywords)
        except TypeError:
            return built
        built = built()
    return built


def build_errors(group_cfg, option: str) -> list[str]:
    """Build every outermost target node of one option's composed config; what failed."""
    raw = OmegaConf.to_container(group_cfg, resolve=False)
    errors = []
    for path in outermost_targets(raw):
        node_cfg = OmegaConf.select(group_cfg, path) if path else group_cfg
        target = node_cfg._target_
        where = f"{option} ({path or '<root>'}, {target})"
        try:
            obj = build(node_cfg)
        except Exception as exc:  # every failure of the group is collected, then the test fails once
            errors.append(f"{where}: {type(exc).__name__}: {exc}")
            continue
        expected = hydra.utils.get_object(target)
        if isinstance(obj, functools.partial):  # still needs arguments (the task gives them)
            if obj.func is not expected:
                errors.append(f"{where}: built a partial of {obj.func}, not of {target}")
        elif inspect.isclass(expected) and not isinstance(obj, expected):
            errors.append(f"{where}: built a {type(obj).__qualname__}, not a {target}")
    return errors


def plain_option_node(group: str, option: str):
    """The option's node as Hydra places it at ``cfg.<group>`` (a conf/<group>/<option>.yaml file or a
    ConfigStore node), or None when it has a defaults list or a package header (then it is composed)."""
    path = CONF_DIR / group / f"{option}.yaml"
    if path.is_file():
        lines = path.read_text().splitlines()
        header = itertools.takewhile(lambda line: line.startswith("#"), lines)
        if any("@package" in line for line in header):
            return None
        node = OmegaConf.load(path)
    else:
        node = ConfigStore.instance().load(f"{group}/{option}.yaml").node
    return None if "defaults" in node else node


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_option_that_needs_no_weights_or_data_instantiates(group, tmp_path):
    overrides = [
        f"paths.root_dir={CONF_DIR.parent}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'out'}",
    ]
    built, errors, signature_only = [], [], {}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        options = sorted(GlobalHydra.instance().config_loader().get_group_options(group))
        # one composition per group; each option's node is put in place as Hydra composes it (fast)
        cfg = compose(GROUPS[group], overrides=overrides, return_hydra_config=True)
        for option in options:
            node = plain_option_node(group, option)
            if node is None:
                node = compose(GROUPS[group], overrides=[*overrides, f"{group}={option}"])[group]
            with open_dict(cfg):
                cfg[group] = node
            reason = why_not_offline(OmegaConf.to_container(cfg[group], resolve=False))
            if reason is not None:
                signature_only[option] = reason
                continue
            failures = build_errors(cfg[group], option)
            errors += failures
            if not failures:
                built.append(option)
    assert not errors, f"{group}:\n  " + "\n  ".join(errors)
    by_name = {o for o in options if o.startswith(OFFLINE_NAMES)}
    assert by_name <= set(built), f"{group}: {sorted(by_name - set(built))} not built; signature only: {signature_only}"
    assert built, f"no option of {group} builds offline: {signature_only}"
