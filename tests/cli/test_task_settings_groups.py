"""A task's settings groups are declared once: ``TASK_SETTINGS`` of its checks module (constructor keyword ->
settings class). The config checks build those classes, and the entry point builds the task object with each
``cls.from_config(cfg)`` (launch.entry.build_task), so no ``task.run`` node names a settings key again.

Both entry points and every task are composed as the entry points compose them (Hydra's compose API); the
values a task receives are compared with the values typed on the command line.
"""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from speechbias.checked_settings import settings_keys
from speechbias.launch.config_checks import task_checks_module
from speechbias.launch.entry import build_task, task_class_of

# task name -> (entry config, overrides choosing it)
TASKS = {
    "speat": ("evaluate", ["task=speat"]),
    "wer_disparity": ("evaluate", ["task=wer_disparity"]),
    "spoken_stereoset": ("evaluate", ["task=spoken_stereoset", "sllm=policy"]),
    "report": ("evaluate", ["task=report"]),
    "train_ser": ("train", []),
}

# non-default values typed for each task, and what the task's settings groups must hold then (keyword ->
# field -> value, written here from the typed text)
TYPED = {
    "speat": (
        ["speat.n_permutations=77", "speat.per_layer=false", "speat.n_resamples=123"]
        + ["extraction.batch_size=3", "extraction.pad_short=true", "extraction.max_clip_seconds=90"],
        {
            "speat": {"n_permutations": 77, "per_layer": False, "n_resamples": 123},
            "extraction": {"batch_size": 3, "pad_short": True, "max_clip_seconds": 90.0},
        },
    ),
    "wer_disparity": (
        ["task.normalizer=none", "task.include_undisclosed=true", "task.wer_ci_resamples=9", "task.glmm.n_agq=3"]
        + ["corpus.min_group.speakers=2", "corpus.name=my_corpus"],
        {
            "settings": {"normalizer": "none", "include_undisclosed": True, "wer_ci_resamples": 9},
            "glmm": {"n_agq": 3},
            "min_group": {"speakers": 2},
            "corpus_settings": {"name": "my_corpus"},
        },
    ),
    "spoken_stereoset": (
        ["task.batch_size=3", "task.orders=all", "task.sampling.top_k=7", "task.prompt.option='{letter}) {text}'"]
        + ["task.answer.cer_threshold=0.3", "task.statistics.histogram_bins=5"],
        {
            "settings": {"batch_size": 3, "orders": "all"},
            "sampling": {"top_k": 7},
            "prompt": {"option": "{letter}) {text}"},
            "answer": {"cer_threshold": 0.3},
            "statistics": {"histogram_bins": 5},
        },
    ),
    "report": (
        ["paper_results=paper.csv", "task.alpha=0.01", "task.corrections=[holm]", "task.wandb_report=false"]
        + ["task.extra_sweep_dirs=[other_sweep]"],
        {
            "settings": {"alpha": 0.01, "corrections": ("holm",), "wandb_report": False},
            "folders": {"paper_results": "paper.csv"},
        },
    ),
    "train_ser": (
        ["lr=3e-4", "max_steps=12", "steps_per_call=5", "fit_threads=2", "ser_data.dev_fraction=0.25"]
        + ["propagation.speat_results=earlier/results.csv", "extraction.num_workers=1"],
        {
            "training": {"lr": (3e-4,), "max_steps": 12, "steps_per_call": 5, "fit_threads": 2},
            "valence_data": {"dev_fraction": 0.25},
            "propagation": {"speat_results": "earlier/results.csv"},
            "extraction": {"num_workers": 1},
        },
    ),
}

# ${key}, ${oc.select:key,...}: the key an interpolation reads (each one in a string, nested ones too)
INTERPOLATED_KEY = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)")


def compose_task(conf_dir, tmp_path, task: str, typed=()) -> DictConfig:
    name, overrides = TASKS[task]
    extra = [f"sweep_dir={tmp_path}"] if task == "report" else []
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(
            name,
            overrides=[*overrides, *extra, *typed, "logger=none", f"paths.cache_dir={tmp_path / 'cache'}"]
            + [f"paths.output_dir={tmp_path / 'out'}"],
        )


def task_settings(cfg: DictConfig) -> dict:
    return task_checks_module(str(cfg.task.name)).TASK_SETTINGS


def declared_keys() -> tuple[set[str], set[str]]:
    """(every key a settings group of some task declares, every such group's node: read whole)."""
    keys, nodes = set(), set()
    for task in TASKS:
        for group in task_checks_module(task).TASK_SETTINGS.values():
            keys |= set(settings_keys(group))
            nodes |= {group.NODE} if group.NODE else set()
    return keys, nodes


def pointer_lines(cfg: DictConfig) -> list[str]:
    """``task.run.<path> -> <key>`` for each interpolation below ``task.run`` that reads a key a settings group
    declares (or a value below one: ``task.domains[0]``) or a settings group's whole node (``task.glmm``)."""
    keys, nodes = declared_keys()

    def declared(key: str) -> bool:
        return key in nodes or any(key == k or key.startswith(k + ".") or key.startswith(k + "[") for k in keys)

    def walk(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{path}[{i}]")
        elif isinstance(node, str):
            yield from (f"{path} -> {key}" for key in INTERPOLATED_KEY.findall(node) if declared(key))

    return list(walk(OmegaConf.to_container(cfg.task.run, resolve=False), "task.run"))


def test_every_task_of_both_entry_points_is_covered(conf_dir):
    tasks = {p.stem for p in (conf_dir / "task").glob("*.yaml")} | {OmegaConf.load(conf_dir / "train.yaml").task.name}
    assert tasks == set(TASKS) == set(TYPED)
    for task in TASKS:
        assert task_checks_module(task).TASK_SETTINGS, task  # every task receives settings groups


@pytest.mark.parametrize("task", list(TASKS))
def test_no_run_node_reads_a_settings_key(conf_dir, tmp_path, task):
    cfg = compose_task(conf_dir, tmp_path, task)
    assert pointer_lines(cfg) == []
    assert set(task_settings(cfg)).isdisjoint(cfg.task.run)  # no keyword given twice


def test_a_pointer_line_or_a_whole_node_read_would_be_found(conf_dir, tmp_path):
    cfg = compose_task(conf_dir, tmp_path, "wer_disparity")
    OmegaConf.update(cfg, "task.run.settings", {"wer_ci_resamples": "${task.wer_ci_resamples}"}, force_add=True)
    OmegaConf.update(cfg, "task.run.glmm", {"node": "${oc.select:task.glmm,null}"}, force_add=True)
    OmegaConf.update(cfg, "task.run.extra", ["${task.categories[0]}"], force_add=True)
    assert pointer_lines(cfg) == [
        "task.run.settings.wer_ci_resamples -> task.wer_ci_resamples",
        "task.run.glmm.node -> task.glmm",
        "task.run.extra[0] -> task.categories",
    ]


@pytest.mark.parametrize("task", list(TASKS))
def test_the_task_object_receives_its_settings_groups_built_from_the_typed_values(
    conf_dir, tmp_path, monkeypatch, task
):
    typed, expected = TYPED[task]
    cfg = compose_task(conf_dir, tmp_path, task, typed)
    cls = task_class_of(cfg)
    received, original = {}, cls.__init__

    def recording_init(self, *args, **kwargs):
        received.update(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", recording_init)
    assert isinstance(build_task(cfg), cls)
    groups = task_settings(cfg)
    assert set(expected) == set(groups)
    for keyword, group in groups.items():
        assert type(received[keyword]) is group
        assert received[keyword] == group.from_config(cfg)
        for field, value in expected[keyword].items():
            assert getattr(received[keyword], field) == value, (keyword, field)


def test_importing_the_helper_imports_no_torch_or_lightning():
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from speechbias.launch.entry import build_task\n"
        "print(','.join(m for m in ('torch', 'lightning', 'pytorch_lightning') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr
