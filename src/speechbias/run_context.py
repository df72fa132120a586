"""What a run is called: the config option chosen per group, and the upstream's identity columns.

``${speechbias.choice:<group>}`` (registered with :func:`register_choice_resolver`, which the entry
points call before composing) is the option chosen for a config group, e.g. ``hubert_xl`` for
``upstream``: task configs pass it to their task as the run's readable name.
``${speechbias.folder_name_excluded_keys:}`` is the list of override keys job folder names leave out
(:func:`speechbias.result_neutral_keys.folder_name_excluded_keys`), plus the keys given as arguments.
``${speechbias.listed_options:<group>}`` is the list of options a job's overrides give a config group as a list
(``bias_test=[a,b]``: Hydra merges them into one node and its choices leave the group out), ``[]`` when the
group got one option (a SpEAT job computes every listed pair: tasks/speat_pairs.py).
``${speechbias.config_dir:}`` is the run's primary config folder (where train.py's bias tests are named).
``${speechbias.process_id:}`` is the id of the process that composed the config (cached in it, as Hydra's
``${now:}`` is, so a sweep's workers resolve the same value): with the sub-second time it makes the run and
sweep folders of two commands started at once on one machine distinct (conf/evaluate.yaml, conf/train.yaml
``hydra.run.dir``, ``hydra.sweep.dir``).
"""

from __future__ import annotations

import functools
import os

from omegaconf import DictConfig, OmegaConf

from speechbias.result_neutral_keys import folder_name_excluded_keys

CHOICE_RESOLVER = "speechbias.choice"
LISTED_OPTIONS_RESOLVER = "speechbias.listed_options"
CONFIG_DIR_RESOLVER = "speechbias.config_dir"
PROCESS_ID_RESOLVER = "speechbias.process_id"
FOLDER_NAME_EXCLUDED_RESOLVER = "speechbias.folder_name_excluded_keys"


def config_choice(cfg: DictConfig | None, group: str, fallback: str = "") -> str:
    """The option chosen for a config group (e.g. ``hubert_xl`` for ``upstream``), when Hydra knows it
    (the running app's choices, else ``hydra.runtime.choices`` of a config composed with it)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return str(HydraConfig.get().runtime.choices.get(group) or fallback)
    except (ValueError, AttributeError):
        choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) if cfg is not None else None
        if choices is not None and choices.get(group):
            return str(choices.get(group))
        return fallback


def listed_options(cfg: DictConfig | None, group: str) -> list[str]:
    """The option names the job's overrides give config group ``group`` as a list (``bias_test=[a,b]``,
    also from ``hydra.sweeper.params``: a sweep point's overrides), in the order given, repeats dropped;
    ``[]`` when its last override names one option, or there is none. The overrides are those of ``cfg``'s
    ``hydra`` node when it has one (a config composed for a check), else the running app's."""
    return list(_listed_by_group(tuple(job_overrides(cfg))).get(group, ()))


@functools.lru_cache(maxsize=32)
def _listed_by_group(overrides: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """{group: the names its last list override gives, repeats dropped (() for one option)} of a job's
    overrides, parsed once (Hydra's parser, ~2.6 ms for a list job's; a job asks ~10 times)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    listed: dict[str, tuple[str, ...]] = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete() or override.package is not None:
            continue
        value = override.value()
        names = [str(v) for v in value] if isinstance(value, list) else []
        listed[override.key_or_group] = tuple(dict.fromkeys(names))
    return listed


def job_overrides(cfg: DictConfig | None) -> list[str]:
    """The job's overrides (the command line's, a sweep point's): those of ``cfg``'s ``hydra`` node when it
    has one (a config composed for a check), else the running app's; [] outside Hydra."""
    overrides = OmegaConf.select(cfg, "hydra.overrides.task", default=None) if cfg is not None else None
    if overrides is None:
        try:
            from hydra.core.hydra_config import HydraConfig

            overrides = HydraConfig.get().overrides.task if HydraConfig.initialized() else []
        except ValueError:
            overrides = []
    return [str(o) for o in overrides]


def primary_config_dir(cfg: DictConfig | None = None) -> str | None:
    """The run's primary config folder (``conf/``, or the ``--config-path`` given; ``--config-dir`` only
    adds a search folder), when Hydra knows it (the running app, else ``hydra.runtime.config_sources`` of
    a config composed with it); else None."""
    sources = None
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            sources = HydraConfig.get().runtime.config_sources
    except (ImportError, ValueError):
        pass
    if sources is None and cfg is not None:
        sources = OmegaConf.select(cfg, "hydra.runtime.config_sources", default=None)
    for source in sources or []:
        if source.get("provider") == "main" and source.get("schema") == "file":
            return str(source.get("path"))
    return None


def register_choice_resolver() -> None:
    """Register ``${speechbias.choice:<group>}``, ``${speechbias.listed_options:<group>}``, ``${speechbias.config_dir:}``, ``${speechbias.process_id:}``
    and ``${speechbias.folder_name_excluded_keys:}`` (idempotent)."""
    OmegaConf.register_new_resolver(
        CHOICE_RESOLVER, lambda group, *, _root_: config_choice(_root_, group), replace=True
    )
    OmegaConf.register_new_resolver(
        LISTED_OPTIONS_RESOLVER, lambda group, *, _root_: listed_options(_root_, group), replace=True
    )
    OmegaConf.register_new_resolver(CONFIG_DIR_RESOLVER, lambda *, _root_: primary_config_dir(_root_), replace=True)
    # cached like Hydra's ${now:}: the id of the process that composed the config, also where a sweep's
    # workers (joblib, SLURM) resolve hydra.sweep.dir again from its pickled copy
    OmegaConf.register_new_resolver(PROCESS_ID_RESOLVER, lambda: str(os.getpid()), replace=True, use_cache=True)
    # conf/sweep/folders.yaml's exclude_keys: the one list of result-neutral keys
    # (+ any keys given: ${speechbias.folder_name_excluded_keys:aggregation,bias_test}, the lists of a paper experiment)
    OmegaConf.register_new_resolver(
        FOLDER_NAME_EXCLUDED_RESOLVER, lambda *extra: [*folder_name_excluded_keys(), *extra], replace=True
    )


def upstream_info(upstream, name: str | None = None) -> dict:
    """Run identity columns: upstream name, family, model id and fingerprint. ``name``: the config
    option (``${speechbias.choice:upstream}``), used when the upstream has no display name."""
    fields = upstream.fingerprint_fields()
    shown = getattr(upstream, "display_name", None) or name or fields.get("name") or type(upstream).__name__
    family = fields.get("family") or getattr(upstream, "family", None) or "other"
    return {
        "upstream": str(shown),
        "family": str(family),
        "model_id": str(fields.get("model_id", shown)),
        "fingerprint": upstream.fingerprint,
    }


#: the id of the multirun a job belongs to, set by the sweep's status callback (launch/sweep_status.py)
#: for every job of the sweep (joblib workers and SLURM jobs inherit it); unset in a single run
SWEEP_ID_ENV = "SPEECHBIAS_SWEEP_ID"
