"""The SpEAT task's config checks (``task=speat``): a writable cache and a usable bias test (each of a job's
listed tests: ``bias_test=[a,b]``); its settings groups, ``speat.*`` and ``extraction.*``, are in every
evaluate.py config: launch.config_checks checks them (``shared_settings``)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.features.extraction_settings import ExtractionSettings
from speechbias.speat.settings import SpeatSettings
from speechbias.tasks.input_checks import check_bias_test, check_cache_folder

# the settings groups the task object receives (constructor keyword -> class), built by launch.entry.build_task
TASK_SETTINGS = {"speat": SpeatSettings, "extraction": ExtractionSettings}

# what to type instead of a key of a listed group, which each listed option's own config would not see
LISTED_GROUP_FIXES = {
    "bias_test": "published lists: selection=paper; any other key: run that test alone (bias_test=<name> {key}=...) "
    "or give it a YAML of its own under --config-dir",
    "aggregation": "each aggregation is an option of its own: list the ones you want, aggregation=[mean_sum,max_q3]",
}


def check_config(cfg: DictConfig) -> None:
    """The cache folder takes files; the bias test's manifest (or its corpus folders) checks out; a job
    given a list of tests checks each as ``bias_test=<name>`` composes it (its node is their merge)."""
    check_cache_folder(cfg)
    check_no_keys_of_listed_groups(cfg)
    for key, node in listed_bias_tests(cfg):
        check_bias_test(node, key, cfg)


def check_no_keys_of_listed_groups(cfg: DictConfig) -> None:
    """:class:`ConfigError` for a ``bias_test.*`` (``aggregation.*``) key in a job given a list of tests
    (aggregations): each listed option is composed from its own file, so the key would be ignored and the
    job would measure something other than what was asked."""
    from speechbias.run_context import job_overrides, listed_options

    for group, fix in LISTED_GROUP_FIXES.items():
        names = listed_options(cfg, group)
        typed = [o for o in job_overrides(cfg) if o.lstrip("+~").startswith(f"{group}.")] if names else []
        if typed:
            key = typed[0].lstrip("+~").split("=", 1)[0]
            raise ConfigError(
                f"{typed[0]}: a list {group}=[{','.join(names)}] composes each option from its own config, "
                f"so {key} would be ignored; {fix.format(key=key)}"
            )


def listed_bias_tests(cfg: DictConfig) -> list[tuple[str, DictConfig]]:
    """(key shown in errors, node) of each bias test of ``cfg``: ``bias_test``, or ``bias_test=<name>``
    for each name of a list, composed from the run's config folder with ``cfg``'s paths, seed, selection."""
    from speechbias.config_composition import bias_test_configs
    from speechbias.run_context import listed_options, primary_config_dir

    names = listed_options(cfg, "bias_test")
    if not names:
        node = OmegaConf.select(cfg, "bias_test", default=None)
        return [] if node is None else [("bias_test", node)]
    folder = primary_config_dir(cfg) or str(Path(str(OmegaConf.select(cfg, "paths.root_dir", default="."))) / "conf")
    nodes = bias_test_configs(names, folder)  # composed together (one Hydra config for them all)
    out = []
    for name in names:
        job = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k not in ("bias_test", "hydra")])
        job.bias_test = nodes[name]
        out.append(("bias_test", job.bias_test))
    return out
