"""Every shipped experiment and every option of every config group composes as a user types it, with no
tiny model or demo test standing in, and reaches the checks that run before any work: the composed config
passes them or fails with a user error (one line), never a composition error or a traceback.

- each experiment, for its entry point, as ``python <entry>.py -m experiment=<e>`` composes it (Hydra's
  config loader in MULTIRUN mode, then each sweep job as the launcher composes it: ``load_sweep_config``),
  checked as a single run checks its config (``check_config``: inputs and the models' files);
  the jobs composed cover every value the sweep gives each key (not the whole product: 96 jobs of
  paper_se_curves are 21 composes); ``tests/e2e/test_shipped_experiments.py`` (slow) runs every experiment's
  full pre-flight as typed, in a subprocess;
- each option of each config group alone, for every entry point whose defaults list has the group
  (``evaluate.py upstream=hubert_xl``, ``train.py trainer=ddp``, ``evaluate.py hydra/launcher=slurm``, ...),
  and each launcher instantiated as Hydra instantiates it when a multirun starts;
- all shipped bias tests in one list: ``evaluate.py 'bias_test=[...]'`` and ``train.py 'bias_tests=[...]'``.

Written after e9b6a27, where two corpus-built tests in one list (``experiment=paper_speat``, any
``bias_test=[female_male,young_old]``) failed in Hydra with "bias_test_base@bias_test appears more than
once in the final defaults list", while the list tests used demo tests only.
"""

from __future__ import annotations

import hydra
import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf

from speechbias.errors import find_user_error
from speechbias.launch.command_line_keys import check_keys
from speechbias.launch.config_checks import check_config
from speechbias.launch.sweep_preflight import sweep_jobs

from tests.conftest import CONF_DIR
from tests.entry_commands import run_entry

# the entry point each experiment is for (a new experiment must be added here: the test below fails)
EXPERIMENT_ENTRY = {
    "demo": "evaluate",
    "paper_aggregation": "evaluate",
    "paper_alternates": "evaluate",
    "paper_propagation": "train",
    "paper_se_curves": "evaluate",
    "paper_speat": "evaluate",
    "paper_uk": "evaluate",
}
# config groups no entry point chooses on its own, and why
NOT_CHOSEN = {"bias_test_base": "the shared part of the corpus-built bias tests, taken through their defaults lists"}
# composed for its own entry point only, as a sweep: test_every_experiment_composes_for_its_entry_point...
EXPERIMENTS = "experiment"
ENTRIES = ("evaluate", "train")


def _loader():
    return GlobalHydra.instance().config_loader()


def _inputs(tmp_path) -> list[str]:
    """No data, an empty cache: every corpus, manifest and weight check meets what a new user has."""
    return [f"paths.data_root={tmp_path / 'data'}", f"paths.cache_dir={tmp_path / 'cache'}"]


def _checked(job: DictConfig, what: str) -> None:
    """``job`` passes the single-run checks (its inputs, and its models' files) or fails them with a user error;
    anything else fails the test."""
    try:
        check_config(job)
    except Exception as exc:  # noqa: BLE001 - the point: only a user error may stop a composed config
        if find_user_error(exc) is None:
            raise AssertionError(f"{what}: the checks raised {type(exc).__name__}, not a user error: {exc}") from exc


def _leaf_keys(node, prefix: str = ""):
    """Every leaf key of a composed config (``speat.n_permutations``), Hydra's own node left out."""
    for key in node.keys() if isinstance(node, DictConfig) else ():
        path = f"{prefix}{key}"
        if path == "hydra" or "." in str(key):
            continue  # Hydra's own node; a key with a dot cannot be typed as a dotted path
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none() and not child._is_interpolation() and len(child):
            yield from _leaf_keys(child, path + ".")
        else:
            yield path


def _typed_keys_accepted(cfg: DictConfig, entry: str) -> None:
    """The command-line key check (run before Hydra composes) accepts every key the composed config has."""
    for key in _leaf_keys(cfg):
        check_keys([f"{key}=1"], CONF_DIR, entry)


def _covering(jobs: list[list[str]]) -> list[list[str]]:
    """The jobs, in order, that each bring an override value no earlier chosen job had."""
    seen: set[str] = set()
    chosen = []
    for job in jobs:
        if not set(job) <= seen:
            chosen.append(job)
            seen.update(job)
    return chosen


def _defaults_groups(entry: str) -> set[str]:
    """The groups of an entry config's defaults list (``hydra/launcher`` included), as Hydra composes it."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra.compose(entry, return_hydra_config=True)
    return {g for g in cfg.hydra.runtime.choices if not g.startswith("hydra/") or g == "hydra/launcher"}


def _group_options() -> dict[str, list[str]]:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = _loader()
        groups = [g for g in loader.list_groups("") if g != "hydra"] + ["hydra/launcher"]
        return {g: sorted(loader.get_group_options(g)) for g in groups}


GROUP_OPTIONS = _group_options()
ENTRY_GROUPS = {entry: _defaults_groups(entry) for entry in ENTRIES}


def test_the_experiments_and_groups_here_are_every_shipped_one():
    shipped = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
    assert shipped == sorted(EXPERIMENT_ENTRY), "add the new experiment to EXPERIMENT_ENTRY with its entry point"
    unchosen = {g for g in GROUP_OPTIONS if not any(g in groups for groups in ENTRY_GROUPS.values())}
    assert unchosen == set(NOT_CHOSEN), f"groups no entry point composes: {sorted(unchosen - set(NOT_CHOSEN))}"
    assert {"upstream", "bias_test", "aggregation", "task", "trainer", "hydra/launcher"} <= set(GROUP_OPTIONS)


@pytest.mark.parametrize("experiment", sorted(EXPERIMENT_ENTRY))
def test_every_experiment_composes_for_its_entry_point_and_reaches_its_checks(experiment, tmp_path):
    entry = EXPERIMENT_ENTRY[experiment]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = _loader()
        sweep = loader.load_configuration(entry, [f"experiment={experiment}", *_inputs(tmp_path)], RunMode.MULTIRUN)
        jobs = sweep_jobs(sweep)
        assert jobs, f"{experiment}: a sweep of no job"
        for job in _covering(jobs):
            composed = loader.load_sweep_config(sweep, job)
            _checked(composed, f"{entry}.py -m experiment={experiment}: job {job}")
        _typed_keys_accepted(composed, entry)


def _option_cases():
    for group, options in GROUP_OPTIONS.items():
        for entry in ENTRIES if group != EXPERIMENTS else ():
            if group in ENTRY_GROUPS[entry]:
                for option in options:
                    yield pytest.param(entry, group, option, id=f"{entry}-{group}={option}")


@pytest.mark.parametrize("entry,group,option", list(_option_cases()))
def test_every_option_of_every_group_composes_alone_and_reaches_its_checks(entry, group, option, tmp_path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra.compose(entry, overrides=[f"{group}={option}", *_inputs(tmp_path)], return_hydra_config=True)
        assert cfg.hydra.runtime.choices[group] == option
        if group == "hydra/launcher":
            # as Hydra instantiates and sets up the launcher when a multirun starts
            context = HydraContext(config_loader=_loader(), callbacks=None)
            launcher = Plugins.instance().instantiate_launcher(context, lambda job: None, cfg)
            assert isinstance(launcher, Launcher)
    _checked(cfg, f"{entry}.py {group}={option}")
    _typed_keys_accepted(cfg, entry)


def _bias_tests() -> list[str]:
    return GROUP_OPTIONS["bias_test"]


def test_all_shipped_bias_tests_compose_in_one_list_for_both_entry_points(tmp_path):
    names = ",".join(_bias_tests())
    assert len(_bias_tests()) >= 15
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        job = hydra.compose(
            "evaluate", overrides=[f"bias_test=[{names}]", *_inputs(tmp_path)], return_hydra_config=True
        )
        train = hydra.compose(
            "train", overrides=[f"bias_tests=[{names}]", *_inputs(tmp_path)], return_hydra_config=True
        )
        # the authors' published lists for every test of the list (selection=paper; train.py: +selection=paper)
        paper = hydra.compose(
            "evaluate",
            overrides=[f"bias_test=[{names}]", "selection=paper", *_inputs(tmp_path)],
            return_hydra_config=True,
        )
        train_paper = hydra.compose(
            "train",
            overrides=[f"bias_tests=[{names}]", "+selection=paper", *_inputs(tmp_path)],
            return_hydra_config=True,
        )
    assert list(OmegaConf.to_container(train.bias_tests)) == _bias_tests()
    for cfg, what in (
        (job, "evaluate.py bias_test=[...]"),
        (train, "train.py bias_tests=[...]"),
        (paper, "evaluate.py bias_test=[...] selection=paper"),
        (train_paper, "train.py bias_tests=[...] +selection=paper"),
    ):
        _checked(cfg, what)


def test_the_papers_study_reaches_its_preflight_as_typed(tmp_path):
    """The issue's command: the 16-model study of the six tests as one list per model, parallel launcher."""
    proc = run_entry(
        "evaluate.py",
        "-m",
        "experiment=paper_speat",
        "hydra/launcher=parallel",
        *_inputs(tmp_path),
        f"paths.multirun_root={tmp_path / 'multirun'}",
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert lines and all(line.startswith("error: ") for line in lines[:-1]), proc.stderr[-2000:]
    assert lines[-1].startswith("sweep not launched: 2 problem(s)"), lines[-1]
    assert "no such folder" in lines[0] and "16 model(s) cannot be loaded" in lines[1]
    assert not (tmp_path / "multirun").exists()
