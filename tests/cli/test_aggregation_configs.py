"""Config group ``aggregation``: 33 ConfigStore options (speechbias.launch.aggregation_configs), as users type them."""

from __future__ import annotations

import itertools
import subprocess
import sys

import hydra
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import MissingConfigException

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL, Aggregation
from speechbias.launch.aggregation_configs import aggregation_nodes

NAMES = [f"{t}_{layer}" for t, layer in itertools.product(TEMPORAL, LAYER_CHOICES)]


def _compose(conf_dir, *overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose("evaluate", overrides=[*overrides, "paths.root_dir=/project"], return_hydra_config=True)


def _group_options(conf_dir) -> list[str]:
    """The options Hydra sees in group aggregation (files and ConfigStore), as its sweeper globs them."""
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return GlobalHydra.instance().config_loader().get_group_options("aggregation")


def test_the_config_store_holds_the_product_of_temporal_and_layer_choices(conf_dir):
    stored = ConfigStore.instance().list("aggregation")
    assert sorted(name.removesuffix(".yaml") for name in stored) == sorted(NAMES)
    assert len(NAMES) == 33 and list(aggregation_nodes()) == NAMES
    assert sorted(_group_options(conf_dir)) == sorted(NAMES)
    assert not list((conf_dir / "aggregation").glob("*.yaml"))  # no file beside the stored nodes


@pytest.mark.parametrize("name", NAMES)
def test_each_option_composes_and_builds_its_strategy(conf_dir, name):
    cfg = _compose(conf_dir, f"aggregation={name}")
    temporal, layer = name.split("_", 1)
    assert dict(cfg.aggregation) == {
        "_target_": "speechbias.aggregation.Aggregation",
        "temporal": temporal,
        "layer": layer,
    }
    assert cfg.hydra.runtime.choices.aggregation == name
    built = hydra.utils.instantiate(cfg.aggregation)
    assert built == Aggregation(temporal, layer) and built.name == name


def test_the_default_is_temporal_mean_layer_sum(conf_dir):
    cfg = _compose(conf_dir)
    assert cfg.hydra.runtime.choices.aggregation == "mean_sum"
    assert (cfg.aggregation.temporal, cfg.aggregation.layer) == ("mean", "sum")


def test_an_unknown_option_names_itself_and_the_group(conf_dir):
    with pytest.raises(MissingConfigException, match=r"Could not find 'aggregation/foo_bar'") as info:
        _compose(conf_dir, "aggregation=foo_bar")
    assert "max_q3" in str(info.value)  # the available options are listed below that line


def test_the_appendix_d_glob_expands_to_the_30_strategies_without_layer_sum(conf_dir):
    glob = OverridesParser.create().parse_overrides(["aggregation=glob(*,exclude=*_sum)"])[0].value()
    chosen = glob.filter(_group_options(conf_dir))
    assert sorted(chosen) == sorted(n for n in NAMES if not n.endswith("_sum")) and len(chosen) == 30


def test_the_entry_point_registers_the_options_before_composing(repo_root, tmp_path):
    """``python evaluate.py aggregation=max_q3 --cfg job`` in a fresh process, from another folder."""
    out = subprocess.run(
        [sys.executable, str(repo_root / "evaluate.py"), "aggregation=max_q3", "--cfg", "job", "-p", "aggregation"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "temporal: max" in out.stdout and "layer: q3" in out.stdout
