"""Each setting's default is written once: the YAML value of every settings field agrees with the field.

For every settings group of both entry points (every task of evaluate.py, train.py), the configs are composed
as the entry points compose them (Hydra's compose API) and each field's value is read from the composed config:
- in the compositions named as the group's source of truth (:data:`SOURCES`: the YAML its defaults are
  written in), the value equals the field's default (both as the field holds them), except a value the YAML
  derives from another key (:data:`DERIVED`) or gives on purpose (:data:`OWN_VALUES`), each with its reason;
- with every option of every config group whose node a settings class covers (upstream=..., trainer=...,
  logger=..., task=..., experiment=...), every value is accepted by its group (built from the values).
Groups whose fields are the union of their options' keys (upstream, bias_test, asr, corpus, sllm, the valence
set's source) have no source of truth: each option's value is its own, and a field's default (null, false) is
what an option without the key gets; they are checked with every option.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from speechbias.checked_settings import ACCEPTS
from speechbias.features.extraction_settings import BatchSizePerAccelerator, ExtractionSettings
from speechbias.launch.component_settings import (
    AggregationSettings,
    BiasTestBuilderSettings,
    BiasTestSettings,
    LoggerSettings,
    PropagationAggregationSettings,
    SelectionSettings,
    TrainerSettings,
    UpstreamSettings,
)
from speechbias.launch.config_checks import shared_settings, task_checks_module
from speechbias.run_settings import PathSettings, RunSettings
from speechbias.ser.training_settings import (
    HeadSettings,
    PropagationSettings,
    TrainingSettings,
    ValenceDataSettings,
    ValenceSourceSettings,
)
from speechbias.sllm.adapters.base import SamplingParams
from speechbias.sllm.prompts import PromptTemplate
from speechbias.speat.settings import SpeatSettings
from speechbias.tasks.report_checks import ReportFolders, ReportSettings
from speechbias.tasks.spoken_stereoset_settings import (
    AnswerSettings,
    SpeechLlmSettings,
    SpokenStereoSetSettings,
    StatisticsSettings,
)
from speechbias.tasks.wer_disparity_settings import (
    AsrSettings,
    CorpusLoadSettings,
    CorpusSettings,
    GlmmSettings,
    MinGroupSettings,
    WerDisparitySettings,
)
from tests.conftest import CONF_DIR

# the entry points' default compositions (entry config, overrides), one per task
EVALUATE = ("evaluate", ("task=speat",))
WER = ("evaluate", ("task=wer_disparity",))
SPOKEN = ("evaluate", ("task=spoken_stereoset",))
REPORT = ("evaluate", ("task=report",))
TRAIN = ("train", ())
ENTRY_COMPOSITIONS = (EVALUATE, WER, SPOKEN, REPORT, TRAIN)

# each settings group: the YAML its fields' defaults are written in (its source of truth) and the compositions
# that take their values from it; None: the group's fields are the union of its options' keys
SOURCES = {
    RunSettings: ("conf/evaluate.yaml and conf/train.yaml (top-level keys)", (EVALUATE, TRAIN)),
    PathSettings: ("conf/paths/default.yaml", (EVALUATE, TRAIN)),
    TrainerSettings: ("conf/trainer/cpu.yaml, the default option (gpu, ddp, ... set their own)", (EVALUATE, TRAIN)),
    LoggerSettings: ("conf/logger/wandb.yaml, the default option", (EVALUATE, TRAIN)),
    SelectionSettings: ("conf/selection/ours.yaml, the default option", (EVALUATE,)),
    AggregationSettings: ("mean_sum of the ConfigStore (launch/aggregation_configs.py)", (EVALUATE,)),
    PropagationAggregationSettings: ("conf/train.yaml's propagation.aggregation", (TRAIN,)),
    BatchSizePerAccelerator: ("extraction: of conf/evaluate.yaml and conf/train.yaml", (EVALUATE, TRAIN)),
    ExtractionSettings: ("extraction: of conf/evaluate.yaml and conf/train.yaml", (EVALUATE, TRAIN)),
    SpeatSettings: ("speat: of conf/evaluate.yaml", (EVALUATE,)),
    ReportSettings: ("conf/task/report.yaml", (REPORT,)),
    ReportFolders: ("conf/task/report.yaml", (REPORT,)),
    WerDisparitySettings: ("conf/task/wer_disparity.yaml", (WER,)),
    GlmmSettings: ("conf/task/wer_disparity.yaml", (WER,)),
    SpokenStereoSetSettings: ("conf/task/spoken_stereoset.yaml", (SPOKEN,)),
    AnswerSettings: ("conf/task/spoken_stereoset.yaml", (SPOKEN,)),
    StatisticsSettings: ("conf/task/spoken_stereoset.yaml", (SPOKEN,)),
    SamplingParams: ("conf/task/spoken_stereoset.yaml", (SPOKEN,)),
    PromptTemplate: ("conf/task/spoken_stereoset.yaml (audio, text_only: no default, the YAML's only)", (SPOKEN,)),
    TrainingSettings: ("conf/train.yaml (top-level keys)", (TRAIN,)),
    HeadSettings: ("conf/downstream/valence_head.yaml, the only option", (TRAIN,)),
    PropagationSettings: ("conf/train.yaml's propagation", (TRAIN,)),
    # the paper's valence sets; the default option, demo.yaml, sets its own (OWN_VALUES)
    ValenceDataSettings: (
        "conf/ser_data/mess.yaml and eu_emotion.yaml",
        (("train", ("ser_data=mess",)), ("train", ("ser_data=eu_emotion",))),
    ),
    UpstreamSettings: None,
    BiasTestSettings: None,
    BiasTestBuilderSettings: None,
    AsrSettings: None,
    CorpusSettings: None,
    MinGroupSettings: None,
    CorpusLoadSettings: None,
    SpeechLlmSettings: None,
    ValenceSourceSettings: None,
}

# values a source YAML derives from another key (an interpolation), and why the field's default differs
DERIVED = {
    "paths.root_dir": "the project folder (the entry scripts' or PROJECT_ROOT); the field's '.' is the working folder",
    "paths.data_root": "SPEECHBIAS_DATA, else data/ under paths.root_dir (test_paths_default_to_...)",
    "paths.demo_dir": "experiments/demo under paths.root_dir (test_paths_default_to_...)",
    "paths.cache_dir": "SPEECHBIAS_CACHE, else .cache/speechbias under paths.root_dir (test_paths_default_to_...)",
    "paths.output_root": "outputs/ under paths.root_dir (test_paths_default_to_...)",
    "paths.multirun_root": "multirun/ under paths.root_dir (test_paths_default_to_...)",
    "logger.files_dir": "W&B's folders under the feature cache; the field's null leaves W&B's own",
    "extraction.batch_size": "picked by trainer.accelerator from extraction.batch_size_per_accelerator (cpu: 2); "
    "the field's 8 is the GPU's",
    "task.data_dir": "the shipped demo set under paths.demo_dir",
    "max_steps": "the valence set's own (ser_data.max_steps), else the field's (test_train_py_falls_back_...)",
    "torch_threads": "the valence set's own (ser_data.torch_threads), else the field's (test_train_py_falls_back_...)",
}
# values a source YAML gives on purpose other than the field's default, and why
OWN_VALUES = {
    "ser_data.name": "each valence set's own name",
    "task.paper_models": "the paper's model names -> hub ids: data of the report's YAML; the field's {} maps none",
    "task.paper_tests": "the paper's test names -> bias tests: data of the report's YAML; the field's {} maps none",
}
# the entry point of each experiment other than evaluate.py
EXPERIMENT_ENTRY = {"paper_propagation": "train"}
# config groups whose node settings classes cover, composed with each option: (entry config, overrides); the
# groups both entry points have are composed with evaluate.py's only: their options interpolate no key of one
# entry point alone (model_id, paths.*)
OPTION_COMPOSITIONS = {
    "paths": EVALUATE,
    "upstream": EVALUATE,
    "aggregation": EVALUATE,
    "bias_test": EVALUATE,
    "selection": EVALUATE,
    "trainer": EVALUATE,
    "logger": EVALUATE,
    "asr": WER,
    "corpus": WER,
    "sllm": SPOKEN,
    "task": ("evaluate", ()),
    "downstream": TRAIN,
    "ser_data": TRAIN,
    "experiment": None,  # EXPERIMENT_ENTRY
}


@pytest.fixture(autouse=True, scope="module")
def _no_folder_variables():
    """The YAML's own folders: SPEECHBIAS_DATA, SPEECHBIAS_CACHE and PROJECT_ROOT unset while values resolve."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("SPEECHBIAS_DATA", "SPEECHBIAS_CACHE", "PROJECT_ROOT"):
            patch.delenv(name, raising=False)
        yield


@cache
def composed(entry: str, overrides: tuple[str, ...]) -> DictConfig:
    """The entry config composed with ``overrides``, as the entry point composes it."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(entry, overrides=list(overrides))


def groups_of(cfg: DictConfig) -> tuple:
    """The settings groups of a composed config: the shared ones and its task's own."""
    module = task_checks_module(str(cfg.task.name))
    return (*shared_settings(), *getattr(module, "SETTINGS", ()))


def fields_present(group, cfg: DictConfig):
    """(field, user key, value as composed and resolved, whether the YAML derives it by interpolation) of
    each field of ``group`` that ``cfg`` holds; a ``???`` value (required on the command line) is left out."""
    parent = OmegaConf.select(cfg, group.NODE, default=None) if group.NODE else cfg
    if not isinstance(parent, DictConfig):
        return
    for field in dataclasses.fields(group):
        if ACCEPTS not in field.metadata or field.name not in parent or OmegaConf.is_missing(parent, field.name):
            continue
        value = OmegaConf.select(parent, field.name)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        yield field, group.key_of(field.name), value, OmegaConf.is_interpolation(parent, field.name)


def field_default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def test_every_settings_group_has_its_source_of_truth_named():
    every = {g for entry in ENTRY_COMPOSITIONS for g in groups_of(composed(*entry))}
    assert every == set(SOURCES), f"name the source of truth of {sorted(g.__name__ for g in every - set(SOURCES))}"


@pytest.mark.parametrize("group", [g for g, source in SOURCES.items() if source], ids=lambda g: g.__name__)
def test_the_source_yaml_holds_each_fields_default(group):
    _where, compositions = SOURCES[group]
    checked = 0
    for entry in compositions:
        cfg = composed(*entry)
        for field, key, value, derived in fields_present(group, cfg):
            accepts = field.metadata[ACCEPTS]
            held = accepts.convert(value)  # accepted (ValueError otherwise)
            default = field_default(field)
            if default is dataclasses.MISSING:
                continue  # no default: the YAML's value is the only one
            checked += 1
            if key in DERIVED:
                assert derived, f"{key}: no longer derived; drop it from DERIVED"
            elif key in OWN_VALUES:
                assert held != accepts.convert(default), f"{key}: now the field's default; drop it from OWN_VALUES"
            else:
                assert held == accepts.convert(default), (
                    f"{entry}: {key}={value!r} in the YAML, {default!r} in the field"
                )
    assert checked, f"{group.__name__}: no field found in {compositions}"


def test_paths_default_to_folders_under_the_project_folder():
    """paths.* (conf/paths/default.yaml) are the fields' defaults taken from the project folder."""
    for entry in (EVALUATE, TRAIN):
        paths = composed(*entry).paths
        root = Path(paths.root_dir)
        assert root == Path(__file__).resolve().parents[2]
        for field in dataclasses.fields(PathSettings):
            if field.name != "root_dir":
                assert Path(paths[field.name]) == root / field.default, field.name


def test_train_py_falls_back_to_the_fields_defaults_where_the_valence_set_gives_none():
    """max_steps and torch_threads are ``${oc.select:ser_data.<key>,<default>}``: with a paper set (no key of
    its own) the run gets the fields' defaults."""
    fields = {f.name: f for f in dataclasses.fields(TrainingSettings)}
    for option in ("mess", "eu_emotion"):
        cfg = composed("train", (f"ser_data={option}",))
        assert "max_steps" not in cfg.ser_data and "torch_threads" not in cfg.ser_data
        assert cfg.max_steps == fields["max_steps"].default
        assert cfg.torch_threads == fields["torch_threads"].default


def test_the_batch_size_per_accelerator_is_the_one_the_accelerator_picks():
    for accelerator, option in (("cpu", "cpu"), ("gpu", "gpu")):
        cfg = composed("evaluate", ("task=speat", f"trainer={option}"))
        assert cfg.trainer.accelerator == accelerator
        picked = getattr(BatchSizePerAccelerator, accelerator)  # the class attribute: the field's default
        assert cfg.extraction.batch_size == picked
    assert ExtractionSettings.batch_size == BatchSizePerAccelerator.gpu


def _group_options() -> dict[str, list[str]]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        return {g: sorted(loader.get_group_options(g)) for g in loader.list_groups("") if g != "hydra"}


GROUP_OPTIONS = _group_options()


def test_every_group_a_settings_class_covers_is_composed_with_each_option():
    nodes = {g.NODE.split(".")[0] for g in SOURCES if g.NODE}
    covered = {g for g in GROUP_OPTIONS if g in nodes} | {"task", "experiment"}  # global packages: any node
    assert covered <= set(OPTION_COMPOSITIONS), sorted(covered - set(OPTION_COMPOSITIONS))
    assert set(OPTION_COMPOSITIONS) <= set(GROUP_OPTIONS)


def _option_cases():
    for group, base in OPTION_COMPOSITIONS.items():
        for option in GROUP_OPTIONS.get(group, ()):
            entry, overrides = base or (EXPERIMENT_ENTRY.get(option, "evaluate"), ())
            yield pytest.param(entry, (*overrides, f"{group}={option}"), id=f"{entry}-{group}={option}")


@pytest.mark.parametrize("entry,overrides", list(_option_cases()))
def test_every_option_holds_values_its_settings_accept(entry, overrides):
    cfg = composed(entry, overrides)
    checked = 0
    for group in groups_of(cfg):
        values = {field.name: value for field, _key, value, _derived in fields_present(group, cfg)}
        if values:
            group(**values)  # a value not accepted: ConfigError naming it
            checked += len(values)
    assert checked > 10
