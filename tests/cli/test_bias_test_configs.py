"""config_composition: a bias test by name is the node Hydra composes for bias_test=<name>."""

from __future__ import annotations

import shutil

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from speechbias.config_composition import bias_test_config, bias_test_configs, known_bias_tests
from tests.conftest import CONF_DIR


def _evaluate_node(name: str):
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("evaluate", overrides=[f"bias_test={name}"]).bias_test


@pytest.mark.parametrize("name", ["female_male", "us_foreign", "demo_voice"])
def test_the_node_is_the_one_evaluate_py_composes(name):
    # the corpus-built tests take their builder and manifest from conf/bias_test_base/corpus_built.yaml
    assert OmegaConf.to_container(bias_test_config(name, CONF_DIR)) == OmegaConf.to_container(_evaluate_node(name))


def test_tests_composed_together_are_each_the_node_evaluate_py_composes(tmp_path):
    conf = tmp_path / "conf"  # a folder of its own: nothing composed from it yet
    shutil.copytree(CONF_DIR, conf)
    names = known_bias_tests(conf)
    nodes = bias_test_configs(["demo_voice", *names], conf)  # a name given twice is composed once
    assert list(nodes) == ["demo_voice", *(n for n in names if n != "demo_voice")]
    for name in names:
        assert OmegaConf.to_container(nodes[name]) == OmegaConf.to_container(_evaluate_node(name)), name
    with pytest.raises(ValueError, match=r"no bias test 'nope'"):
        bias_test_configs(["demo_voice", "nope"], conf)


def test_inside_another_hydra_it_composes_from_the_folder_given_and_leaves_that_hydra_as_it_was(tmp_path):
    other = tmp_path / "conf"
    shutil.copytree(CONF_DIR, other)
    (other / "bias_test" / "female_male.yaml").write_text(
        (other / "bias_test" / "female_male.yaml").read_text().replace("human_iat_d: 0.31", "human_iat_d: 0.99")
    )
    with initialize_config_dir(str(other), version_base=None):
        hydra_before = GlobalHydra.instance().hydra
        assert bias_test_config("female_male", other).human_iat_d == 0.99  # the running one's folder
        assert bias_test_config("female_male", CONF_DIR).human_iat_d == 0.31  # a temporary one
        assert GlobalHydra.instance().hydra is hydra_before
    with pytest.raises(ValueError, match=r"no bias test 'nope' .*known: .*female_male"):
        bias_test_config("nope", CONF_DIR)


def test_a_composed_node_is_reused_while_its_files_are_unchanged_and_each_caller_gets_its_own_copy(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    first = bias_test_config("demo_voice", conf)
    first.description = "changed by this caller"
    again = bias_test_config("demo_voice", conf)
    assert again.description != "changed by this caller"
    assert OmegaConf.to_container(again) == OmegaConf.to_container(bias_test_config("demo_voice", CONF_DIR))
    path = conf / "bias_test" / "demo_voice.yaml"
    path.write_text(path.read_text() + "\nextra_key: 1\n")
    assert bias_test_config("demo_voice", conf).extra_key == 1  # the file changed: composed again


def test_the_hydra_internal_is_used_only_within_its_checked_versions(monkeypatch):
    import hydra
    import pytest

    from speechbias.library_internals import hydra as internals

    internals.check_version()  # the installed hydra-core is inside the bound
    monkeypatch.setattr(hydra, "__version__", "1.4.0")
    with pytest.raises(RuntimeError, match=r"hydra-core 1.4.0 is outside >=1.3,<1.4"):
        internals.check_version()
