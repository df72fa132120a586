"""A run's config checked before anything heavy is imported or any model is touched: what every task
shares, then the task's own checks.

:func:`check_config` raises :class:`~speechbias.errors.ConfigError` (one line naming the key, the value and
the fix): a required value not given (``???``), the values of the settings groups every config has
(types and ranges: one settings class per group, :mod:`speechbias.checked_settings`), then the checks of the task named by ``task.name``, which
live beside the task (``check_config`` of ``speechbias.tasks.<task>_checks``: a new task brings its own
module, nothing here changes), and the files of the run's pretrained models
(:mod:`speechbias.launch.model_files_check`). :class:`ConfigCheckCallback` runs them before Hydra makes a single run's
folder; :func:`check_command_line` names unknown config group options (``upstream=...``) before Hydra
composes. Standard library, OmegaConf and Hydra at import; never torch.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.errors import (
    ConfigError,
    error_line,
    find_user_error,
    full_error_requested,
    user_error_ends_command,
    message_line,
)
from speechbias.tasks.input_checks import check_writable_folder

# a command line that sets a required key, shown in the error line
REQUIRED_EXAMPLES = {
    # an experiment's fixed sweep folder (an ad-hoc sweep's is dated: multirun/<date>/<time>-<microseconds>-<pid>)
    "sweep_dir": "python evaluate.py task=report sweep_dir=multirun/paper_speat",
    "corpus.load.manifest": "python evaluate.py task=wer_disparity corpus=asr_manifest corpus.load.manifest=<csv>",
}

# command-line flags after which the config comes from elsewhere (the option check leaves those to Hydra)
OTHER_CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")


def task_checks_module(task: str):
    """``speechbias.tasks.<task>_checks`` (the task's ``check_config``, ``TASK_SETTINGS``, ``SETTINGS``),
    imported; None when the task has no such module."""
    name = f"speechbias.tasks.{task}_checks"
    if not task.isidentifier() or importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def task_module_of(cfg: DictConfig):
    """:func:`task_checks_module` of the config's ``task.name`` (its checks, ``TASK_SETTINGS``, ``SETTINGS``)."""
    return task_checks_module(str(OmegaConf.select(cfg, "task.name", default="") or ""))


def job_hydra_node(cfg: DictConfig):
    """The job's ``hydra`` node: ``cfg``'s own (Hydra's callbacks, a sweep's pre-flight), else Hydra's inside a
    job (a job config has none); None without either."""
    from hydra.core.hydra_config import HydraConfig

    return cfg.hydra if "hydra" in cfg else HydraConfig.get() if HydraConfig.initialized() else None


def check_values(cfg: DictConfig, groups=None) -> None:
    """Every value of the settings ``groups`` present in ``cfg`` (default: the shared ones,
    :func:`shared_settings`, and the task's ``SETTINGS``, each once) has its type and range (one settings
    class per group: :mod:`speechbias.checked_settings`); else :class:`ConfigError` naming the key, the value
    and what is accepted. Reads no file (a sweep's pre-flight runs it for each value a sweep gives a setting)."""
    if groups is None:
        groups = dict.fromkeys((*shared_settings(), *getattr(task_module_of(cfg), "SETTINGS", ())))
    for group in groups:
        if not group.NODE or _has_node(cfg, group.NODE):
            group.from_config(cfg)
    check_weight_free_upstream(cfg)


def shared_settings() -> tuple:
    """The settings groups of both entry points' configs (each checked when its node is in the config), in
    the order a value can depend on another (extraction.batch_size follows trainer.accelerator); a task's
    own groups are checked by its check_config. Imported when a config is checked (the components'
    choices come with pandas), not when the entry point starts."""
    from speechbias.features.extraction_settings import BatchSizePerAccelerator, ExtractionSettings
    from speechbias.launch.component_settings import COMPONENT_SETTINGS
    from speechbias.run_settings import PathSettings, RunSettings
    from speechbias.speat.settings import SpeatSettings

    return (RunSettings, PathSettings, *COMPONENT_SETTINGS, BatchSizePerAccelerator, ExtractionSettings, SpeatSettings)


def check_weight_free_upstream(cfg: DictConfig) -> None:
    """A weight-free upstream's parameters (fbank, mfcc: ``upstream.n_mfcc`` within 1..n_mels, the window
    within n_fft, ...) pass its constructor's own checks, which its config class holds without torch
    (:mod:`speechbias.upstream.classical_fingerprint`); else one line (it used to be Hydra's multi-line
    instantiation error when the run built the upstream)."""
    from speechbias.upstream.deferred import CONFIG_IDENTITIES, WEIGHT_FREE_TARGETS

    node = OmegaConf.select(cfg, "upstream", default=None)
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if target not in WEIGHT_FREE_TARGETS:
        return
    arguments = {str(k): v for k, v in OmegaConf.to_container(node, resolve=True).items() if not str(k).startswith("_")}
    try:
        CONFIG_IDENTITIES[target](**arguments)
    except (TypeError, ValueError) as exc:
        hydra_node = job_hydra_node(cfg)  # the option as composed for this job (a sweep's pre-flight: each job's)
        chosen = OmegaConf.select(hydra_node, "runtime.choices.upstream", default=None) if hydra_node else None
        raise ConfigError(f"upstream={chosen or '...'}: {exc}") from None


def _has_node(cfg: DictConfig, key: str) -> bool:
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    # public OmegaConf calls only (an interpolation is not resolved here; a None or '???' value is no node)
    return (
        isinstance(node, DictConfig)
        and name in node
        and (OmegaConf.is_interpolation(node, name) or node[name] is not None)
    )


def check_config(cfg: DictConfig, models: bool = True) -> None:
    """Every check that applies to ``cfg`` (a job config, with or without its ``hydra`` node): required
    values, the shared settings groups' values, then the task's own (its ``SETTINGS`` built, then its
    ``check_config``: its files) and, unless ``models`` is false (a sweep's pre-flight names them all in one
    line), the files of its pretrained models (:mod:`speechbias.launch.model_files_check`, no torch).
    A bad input file and missing model files are named together, in one line."""
    check_required_values(cfg)
    check_values(cfg, shared_settings())
    check_typed_groups_read(cfg)
    check_run_node_leaves_settings(cfg)
    from speechbias.launch.model_files_check import missing_model_files

    missing = missing_model_files(cfg) if models else []
    module = task_module_of(cfg)
    try:
        for group in getattr(module, "SETTINGS", ()):
            group.from_config(cfg)
        if module is not None:
            module.check_config(cfg)
    except Exception as exc:
        user = find_user_error(exc)
        if user is None or not missing:
            raise
        raise ConfigError("; also: ".join([message_line(user), *map(message_line, missing)])) from exc
    if len(missing) == 1:
        raise missing[0]
    if missing:
        raise ConfigError("; also: ".join(map(message_line, missing)))


# ${key}, ${oc.select:key,...}, ${speechbias.choice:group}, ${speechbias.listed_options:group}: the top-level key
# a value reads; the clip limit's resolvers read CLIP_LIMIT_KEYS; Hydra's own node is no task's reading
INTERPOLATED_KEY = re.compile(r"\$\{(?:oc\.select:|speechbias\.choice:|speechbias\.listed_options:)?([A-Za-z_]\w*)")
CLIP_LIMIT_RESOLVER = "${speechbias.clip_limit_"
# groups that set values anywhere (# @package _global_) rather than a node of their own
GLOBAL_GROUPS = ("task", "experiment", "sweep")


def keys_read_by_task(cfg: DictConfig) -> set[str]:
    """The top-level keys of ``cfg`` that its task reads: ``task``, the nodes (or top-level keys) of its
    settings groups (its checks module's ``TASK_SETTINGS`` and ``SETTINGS``: ``speat``, ``lr``), and every key
    their values interpolate, followed through the nodes they name (``${bias_test}`` -> ``${selection.name}``)."""
    from speechbias.checked_settings import setting_fields
    from speechbias.features.clip_memory import CLIP_LIMIT_KEYS

    plain = OmegaConf.to_container(cfg, resolve=False)
    module = task_module_of(cfg)
    groups = {*getattr(module, "TASK_SETTINGS", {}).values(), *getattr(module, "SETTINGS", ())}
    todo = ["task"]
    for group in groups:
        todo += [group.NODE.split(".")[0]] if group.NODE else [f.name for f in setting_fields(group)]
    read = set()
    while todo:
        key = todo.pop()
        if key in read or key not in plain or key == "hydra":
            continue
        read.add(key)
        for text in _strings(plain[key]):
            todo += INTERPOLATED_KEY.findall(text)
            if CLIP_LIMIT_RESOLVER in text:
                todo += [k.split(".")[0] for k in CLIP_LIMIT_KEYS]
    return read


def _strings(node):
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def check_typed_groups_read(cfg: DictConfig) -> None:
    """A config group or top-level key typed on the command line (``bias_test=...``, ``bias_test.manifest=...``,
    ``speat.n_permutations=...``, ``check_audio=...``) is read by the run's task (:func:`keys_read_by_task`);
    else :class:`ConfigError`: task=wer_disparity would ignore it. The overrides are ``hydra.overrides.task``
    (a job config without its hydra node: Hydra's, inside a job)."""
    hydra_node = job_hydra_node(cfg)
    if hydra_node is None:
        return
    typed, choices = hydra_node.overrides.task, hydra_node.runtime.choices
    groups = {str(g).split("@")[0] for g in choices if not str(g).startswith("hydra")} - set(GLOBAL_GROUPS)
    typed_groups = {str(o).lstrip("+~").split("=")[0].split(".")[0].split("@")[0]: str(o) for o in typed}
    top = {str(k) for k in cfg.keys()} - {"hydra", *GLOBAL_GROUPS}
    unread = [(g, o) for g, o in typed_groups.items() if g in groups or g in top]
    if not unread:
        return
    read = keys_read_by_task(cfg)
    for key, override in unread:
        if key not in read:
            task = OmegaConf.select(cfg, "task.name", default="?")
            nodes = {
                k for k in top if isinstance(OmegaConf.select(cfg, k, throw_on_resolution_failure=False), DictConfig)
            }
            reads = ", ".join(sorted(k for k in groups | nodes if k in read))  # its groups and nodes
            raise ConfigError(f"{override}: task={task} does not read {key} (it reads {reads}); leave it out")


def check_run_node_leaves_settings(cfg: DictConfig) -> None:
    """``task.run`` holds no argument that the entry point passes from the task's settings groups
    (``TASK_SETTINGS``: ``+task.run.speat={...}`` would be overridden by the ``speat`` node without a word)."""
    module = task_module_of(cfg)
    run = OmegaConf.select(cfg, "task.run", default=None)
    for keyword, group in getattr(module, "TASK_SETTINGS", {}).items():
        if isinstance(run, DictConfig) and keyword in run:
            where = f"the keys of {group.NODE}" if group.NODE else "its top-level keys"
            raise ConfigError(f"task.run.{keyword}: the task's {keyword} settings are built from {where}; set those")


# the job config (without its hydra node, as YAML) that ConfigCheckCallback checked in this process and
# the job has not yet checked again: check_config_unless_checked takes it once
_checked_by_callback: str | None = None


def job_config_text(cfg: DictConfig) -> str:
    """``cfg`` without its ``hydra`` node, as unresolved YAML: what identifies a job's config whether
    it comes with the hydra node (Hydra's callbacks) or without (the task function)."""
    job = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    return OmegaConf.to_yaml(job)


def check_config_unless_checked(cfg: DictConfig) -> None:
    """:func:`check_config`, unless :class:`ConfigCheckCallback` has just checked this very config in
    this process (a single run: Hydra's ``on_run_start``, then the task function): the checks decode
    every manifest clip and compose each bias test, ~0.6 s of a warm train.py run, done once."""
    global _checked_by_callback
    checked, _checked_by_callback = _checked_by_callback, None
    if checked is not None and checked == job_config_text(cfg):
        return
    check_config(cfg)


def check_required_values(cfg: DictConfig) -> None:
    """No ``???`` left outside the ``hydra`` node."""
    missing = sorted(_missing_keys(cfg))
    if missing:
        key = missing[0]
        example = REQUIRED_EXAMPLES.get(key, f"{key}=...")
        raise ConfigError(f"{key}: required, give it on the command line, e.g. {example}")


def _missing_keys(node, prefix: str = "") -> list[str]:
    """Keys whose value is literally ``???`` (interpolations are not resolved; ``hydra`` is skipped)."""
    found = []
    if isinstance(node, DictConfig):
        items = [(str(k), k) for k in node.keys() if not (prefix == "" and k == "hydra")]
    elif isinstance(node, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(node))]
    else:
        return found
    for name, key in items:
        full = f"{prefix}.{name}" if prefix and not name.startswith("[") else f"{prefix}{name}"
        if OmegaConf.is_interpolation(node, key):
            continue
        if OmegaConf.is_missing(node, key):
            found.append(full)
        else:
            child = node[key]
            if isinstance(child, (DictConfig, ListConfig)):
                found.extend(_missing_keys(child, full))
    return found


class ConfigCheckCallback(Callback):
    """Hydra callback (``hydra.callbacks`` of the entry configs): checks a single run's config before
    Hydra creates its output folder; a bad value prints one line and exits 1."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        global _checked_by_callback
        _checked_by_callback = None
        # a user error (a bad value; a full cache disk while the audio index is written): one line, exit 1;
        # anything else goes on (Hydra warns about it and the job reports it)
        with user_error_ends_command():
            check_config(config)
            run_dir = OmegaConf.select(config, "hydra.run.dir", default=None)
            check_writable_folder(
                run_dir,
                "hydra.run.dir",
                create=False,
                fix="give a writable folder: paths.output_root=... or hydra.run.dir=...",
            )
            _checked_by_callback = job_config_text(config)  # the job need not check it again


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """The override arguments of an entry point's command line (``key=value``, ``+key=value``, ``~key``),
    without Hydra's flags (``-m``, ``--cfg job``, ...)."""
    return [a for a in argv if not a.startswith("-") and ("=" in a or a.startswith("~"))]


def _option_names(value) -> list[str]:
    """The option names an override's value chooses: one name, each of a sweep's ``a,b`` /
    ``choice(a,b)`` or of a list ``[a,b]``; none for ``glob(...)``, ``null`` and non-string values."""
    from hydra.core.override_parser.types import ChoiceSweep

    items = value.list if isinstance(value, ChoiceSweep) else value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str)]


def unknown_option(group: str, name: str, options: list[str]) -> ConfigError:
    """``<group>=<name>: no such option in conf/<group>/; close matches: a, b (or N options: ...)``."""
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    if close:
        hint = f"did you mean {' or '.join(close)}?"
    else:
        shown = ", ".join(options[:6]) + (", ..." if len(options) > 6 else "")
        hint = f"{len(options)} options: {shown}"
    return ConfigError(f"{group}={name}: no such option of config group {group}; {hint}")


def check_group_options(overrides: Sequence[str], config_dir: str | Path, config_name: str | None = None) -> None:
    """Every config group option named on the command line exists (``upstream=...``, ``bias_test=a,b``,
    ``aggregation=...``, ``hydra/launcher=...``); else :class:`ConfigError` naming the close matches
    (difflib) instead of Hydra's list of every option. The options are those Hydra's own loader finds
    for ``config_dir`` (YAML files and the ConfigStore); the loader is set up only for a name that
    :func:`surely_an_option` does not find under a key that is not :func:`surely_a_value` of the entry
    config ``config_name`` (``sweep_dir=...``; None: every such key is asked of the loader)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return  # a malformed override: Hydra's own message names it
    wanted = [
        (o.key_or_group, _option_names(o.value()), isinstance(o.value(), list))
        for o in parsed
        if not o.is_delete() and "." not in o.key_or_group
    ]
    wanted = [(group, names, is_list) for group, names, is_list in wanted if names]
    with ExitStack() as hydra_open:
        loader = None  # Hydra's loader, set up at the first option not found without it
        for group, names, is_list in wanted:
            if not all(surely_an_option(config_dir, group, name) for name in names):
                if surely_a_value(config_dir, config_name, group):
                    continue
                if loader is None:
                    hydra_open.enter_context(
                        initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3")
                    )
                    loader = GlobalHydra.instance().config_loader()
                parent, _, name = group.rpartition("/")
                if name not in loader.list_groups(parent):
                    continue  # a plain value such as lr=1e-4
                options = loader.get_group_options(group)
                for name in names:
                    if name not in options:
                        raise unknown_option(group, name, options)
            if is_list and len(names) > 1 and not (group in LISTED_GROUPS and speat_task(parsed)):
                raise list_of_options(group, names)


def surely_an_option(config_dir: str | Path, group: str, name: str) -> bool:
    """Whether ``name`` is an option of ``group`` that Hydra's loader certainly finds: a YAML file of the group
    in ``config_dir`` (the primary config folder) or a config the ConfigStore holds for it (the aggregation
    options). Looked up without Hydra's loader (its set-up and listings cost ~0.13 CPU-s of a list job of 33
    aggregations); a name found neither way is left to the loader (search path additions, plug-ins' groups)."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.object_type import ObjectType

    if not name or "/" in name or "\\" in name or name.startswith("."):
        return False
    if (Path(config_dir) / group / f"{name}.yaml").is_file():
        return True
    return ConfigStore.instance().get_type(f"{group}/{name}.yaml") == ObjectType.CONFIG


def surely_a_value(config_dir: str | Path, config_name: str | None, key: str) -> bool:
    """Whether ``key=...`` sets a value, not a config group: a top-level key that the entry config
    ``config_name`` or an option of one of its ``_global_`` groups holds (``sweep_dir``, ``seed``;
    :func:`~speechbias.launch.command_line_keys.top_keys`, read from the YAML files) and that is no group
    of its defaults list, of the folder or of the ConfigStore. (A search path plug-in could add a group of
    that name: this project has none; with one, Hydra's compose would still refuse a bad option, in its
    own words.)"""
    from hydra.core.config_store import ConfigStore
    from hydra.core.object_type import ObjectType

    from speechbias.launch.command_line_keys import top_keys

    if config_name is None or "/" in key or key.startswith("hydra"):
        return False
    top, _, groups = top_keys(str(Path(config_dir).resolve()), config_name)
    if key not in top or key in groups or (Path(config_dir) / key).is_dir():
        return False
    return ConfigStore.instance().get_type(key) == ObjectType.NOT_FOUND


# groups a SpEAT job (evaluate.py, task=speat) takes as lists: every (test, aggregation) pair is computed
# from one read of the cache (tasks/speat_pairs.py)
LISTED_GROUPS = ("bias_test", "aggregation")


def speat_task(parsed) -> bool:
    """Whether parsed overrides leave evaluate.py's default task, speat (no ``task=`` other than speat)."""
    tasks = [o.value() for o in parsed if o.key_or_group == "task" and not o.is_delete()]
    return not tasks or tasks[-1] == "speat"


def list_of_options(group: str, names: Sequence[str]) -> ConfigError:
    """``group=[a,b]`` of a group other than :data:`LISTED_GROUPS` of a SpEAT job: Hydra would merge the
    options into one config (the last one's values win), so a run would compute one of them and exit 0;
    a run takes one option of such a group, a sweep several."""
    return ConfigError(
        f"{group}=[{','.join(names)}]: a run takes one {group}; Hydra would merge these into one config "
        f"and compute only {names[-1]}. Run them as a sweep: -m {group}={','.join(names)}"
    )


def check_command_line(
    config_dir: str | Path, argv: Sequence[str] | None = None, config_name: str | None = None
) -> None:
    """The entry points' check before ``@hydra.main``: a key no config holds (``bias_tst=...``, with close
    matches; :mod:`speechbias.launch.command_line_keys`, when ``config_name`` names the entry config) or an
    unknown config group option prints one line (``error: ... (HYDRA_FULL_ERROR=1 shows the traceback)``)
    and exits 1. Left to Hydra with ``HYDRA_FULL_ERROR=1`` and when the command line names another config
    folder or name."""
    from speechbias.launch.command_line_keys import check_composed_keys, check_keys

    argv = list(sys.argv[1:] if argv is None else argv)
    if full_error_requested() or any(a.split("=", 1)[0] in OTHER_CONFIG_FLAGS for a in argv):
        return
    try:
        overrides = command_line_overrides(argv)
        unsure = check_keys(overrides, config_dir, config_name) if config_name else []
        check_group_options(overrides, config_dir, config_name)
        check_composed_keys(unsure, overrides, config_dir, config_name)
    except ConfigError as exc:
        print(error_line(exc), file=sys.stderr)
        sys.exit(1)
