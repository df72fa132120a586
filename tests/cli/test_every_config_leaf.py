"""Every leaf of the composed configs of both entry points is checked before any model, extraction or corpus
read: a value of the wrong type, and one out of range, is one line naming the key (a ConfigError).

The configs are composed as the entry points compose them (Hydra's compose API: evaluate.py with each task,
train.py); every leaf is walked. A leaf is either a settings value (a field of a settings class:
speechbias.checked_settings) or listed below as not one, with the reason. The wrong values are derived
here from what a setting says it accepts (its kind and range), and the full config check
(launch.config_checks.check_config, what the entry points run) must refuse each in one line naming the key.
Numbers are also tried property-based (hypothesis): any value outside the range is refused, any inside kept.
"""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.checked_settings import Accepts, settings_keys
from speechbias.errors import ConfigError
from speechbias.launch.config_checks import check_config, shared_settings
from speechbias.tasks import report_checks, train_ser_checks
from speechbias.tasks.spoken_stereoset_settings import SETTINGS as SPOKEN_STEREOSET_SETTINGS
from speechbias.tasks.wer_disparity_settings import SETTINGS as WER_DISPARITY_SETTINGS

# (entry config, overrides, the task's own settings groups); a report needs a sweep folder (the test's tmp)
ENTRY_POINTS = {
    "evaluate task=speat": ("evaluate", ["task=speat"], ()),
    "evaluate task=wer_disparity": ("evaluate", ["task=wer_disparity"], WER_DISPARITY_SETTINGS),
    "evaluate task=spoken_stereoset": ("evaluate", ["task=spoken_stereoset"], SPOKEN_STEREOSET_SETTINGS),
    "evaluate task=report": ("evaluate", ["task=report"], (report_checks.ReportSettings, report_checks.ReportFolders)),
    "train": ("train", [], train_ser_checks.SETTINGS),
}

# leaves that are not settings values (the key or a node above it), and why
NOT_SETTINGS = {
    "task.run": "the task object's wiring: its collaborators, each value pointing at a user key checked where it "
    "is (tests/cli/test_config_targets.py builds or signature-checks every _target_); its settings groups are "
    "built from their own keys (launch.entry.build_task), not named there (tests/cli/test_task_settings_groups.py)",
    "task.name": "chosen by task=...; an unknown task is one line before composing (check_command_line)",
    "task.run_dir": "the report's folder, derived from sweep_dir (hydra.run.dir follows it)",
    "paths.output_dir": "Hydra's run folder (hydra.run.dir), checked as a writable folder before the run",
    "upstream.config": "a tiny test model's transformers config (its architecture), checked by transformers",
    "upstream.model_type": "a tiny test model's transformers model type, checked by transformers",
    "upstream.extra_conf": "s3prl's own options of the upstream, passed on as they are",
    "bias_test.builder.params": "the selection procedure's own keyword overrides, different for each procedure",
    "sllm.model_kwargs": "transformers' from_pretrained arguments, passed on as they are",
    "sllm.generate_kwargs": "transformers' generate arguments, passed on as they are",
    "task.judge": "an optional LLM judge: a _target_ and its own arguments, or null",
}
# Hydra's instantiation keys, written by the config files themselves
INSTANTIATION_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_")
# leaves that name things (checked against the config folder), with a bad value of each
NAMES = {"bias_tests": ("no_such_bias_test", "names of conf/bias_test/*.yaml (or inline configs)")}


def compose_entry(conf_dir, name: str, overrides: list[str], tmp_path) -> DictConfig:
    if "task=report" in overrides:  # a sweep folder with a job folder below it (an empty one is refused)
        (tmp_path / "job" / ".hydra").mkdir(parents=True, exist_ok=True)
    extra = [f"sweep_dir={tmp_path}"] if "task=report" in overrides else []
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(
            name,
            overrides=[*overrides, *extra, f"paths.cache_dir={tmp_path / 'cache'}"],
            return_hydra_config=True,
        )
    return cfg


def leaves(node, prefix: str = ""):
    """Every leaf key of ``node`` (an empty list or mapping is a leaf; the hydra node is skipped)."""
    if isinstance(node, DictConfig):
        keys = [k for k in node.keys() if not (prefix == "" and k == "hydra")]
        children = [(f"{prefix}.{k}" if prefix else str(k), k) for k in keys]
    else:
        children = [(f"{prefix}[{i}]", i) for i in range(len(node))]
    if not children:
        yield prefix
    for full, key in children:
        child = node._get_node(key)
        if (
            isinstance(child, (DictConfig, ListConfig))
            and not OmegaConf.is_interpolation(node, key)
            and not child._is_none()
        ):
            yield from leaves(child, full)
        else:
            yield full


def setting_of(leaf: str, accepted: dict[str, Accepts]) -> str | None:
    """The setting ``leaf`` is (or is an item of: ``task.domains[0]``, ``task.paper_models.x``)."""
    for key in accepted:
        if leaf == key or leaf.startswith(key + "[") or leaf.startswith(key + "."):
            return key
    return None


def not_a_setting(leaf: str) -> bool:
    if leaf.rsplit(".", 1)[-1] in INSTANTIATION_KEYS:
        return True
    return any(leaf == k or leaf.startswith(k + ".") or leaf.startswith(k + "[") for k in NOT_SETTINGS)


def wrong_type(accepts: Accepts):
    """A value of the wrong type for ``accepts`` (derived from its kind alone)."""
    return {
        "int": "abc",
        "float": "abc",
        "floats": "abc",
        "bool": "maybe",
        "choice": ["a", "list"],
        "text": ["a", "list"],
        "texts": 5,
        "mapping": "abc",
        "device": ["a", "list"],
    }[accepts.kind]


def out_of_range(accepts: Accepts):
    """A value of the right type outside ``accepts``'s range; None when it has no range."""
    if accepts.kind in ("int", "float", "floats"):
        if accepts.low is not None:
            below = accepts.low if accepts.low_open else accepts.low - 1
            return int(below) if accepts.kind == "int" else below
        if accepts.high is not None:
            return accepts.high + 1
        return None
    if accepts.kind in ("choice", "device"):
        return "no_such_option"
    if accepts.kind == "text":
        return "" if accepts.nonempty else None
    if accepts.kind == "texts":
        return ["no_such_option"] if accepts.choices else ([] if accepts.nonempty else None)
    return None


def accepted_settings(groups) -> dict[str, Accepts]:
    found = {}
    for group in (*shared_settings(), *groups):
        found.update(settings_keys(group))
    return found


def with_value(cfg: DictConfig, key: str, value) -> DictConfig:
    changed = cfg.copy()
    OmegaConf.update(changed, key, value, merge=False, force_add=True)
    return changed


def assert_one_line_naming(cfg: DictConfig, key: str, value) -> None:
    with pytest.raises(ConfigError) as info:
        check_config(with_value(cfg, key, value))
    message = str(info.value)
    assert "\n" not in message, message
    assert re.match(rf"^{re.escape(key)}[=:]", message), f"{key}={value!r}: {message}"


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_leaf_is_a_checked_setting_or_listed_with_its_reason(conf_dir, tmp_path, entry):
    name, overrides, groups = ENTRY_POINTS[entry]
    cfg = compose_entry(conf_dir, name, overrides, tmp_path)
    accepted = accepted_settings(groups)
    found = list(leaves(cfg))
    unchecked = [
        leaf
        for leaf in found
        if setting_of(leaf, accepted) is None and not not_a_setting(leaf) and leaf.split("[")[0] not in NAMES
    ]
    assert not unchecked, f"{entry}: leaves neither checked nor listed in NOT_SETTINGS: {unchecked}"
    check_config(cfg)  # the composed defaults pass


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_wrong_type_or_an_out_of_range_value_of_every_leaf_is_one_line_naming_it(conf_dir, tmp_path, entry):
    name, overrides, groups = ENTRY_POINTS[entry]
    cfg = compose_entry(conf_dir, name, overrides, tmp_path)
    accepted = accepted_settings(groups)
    settings_found = sorted({s for s in (setting_of(leaf, accepted) for leaf in leaves(cfg)) if s})
    tried = 0
    for key in settings_found:
        accepts = accepted[key]
        assert_one_line_naming(cfg, key, wrong_type(accepts))
        tried += 1
        bad = out_of_range(accepts)
        if bad is not None:
            assert_one_line_naming(cfg, key, bad)
            tried += 1
    for key, (bad, _why) in NAMES.items():
        if key in cfg:
            assert_one_line_naming(cfg, key, 5)  # not a list of names
            with pytest.raises(ConfigError, match=bad):
                check_config(with_value(cfg, key, [bad]))
    assert tried >= len(settings_found)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.safetensors"))


NUMBER_KEYS = sorted(
    {
        key
        for _, _, groups in ENTRY_POINTS.values()
        for key, accepts in accepted_settings(groups).items()
        if accepts.kind in ("int", "float") and (accepts.low is not None or accepts.high is not None)
    }
)


# other fields a value inside the range needs (a cross-field rule: a shard below the shard count, a
# temperature of 0 only for greedy decoding)
CONTEXT = {"task.shard_index": {"shard_count": 2**40}, "task.sampling.temperature": {"do_sample": False}}


def _groups_with(key: str):
    for _, _, groups in ENTRY_POINTS.values():
        for group in (*shared_settings(), *groups):
            if key in settings_keys(group):
                return group
    raise KeyError(key)


@pytest.mark.parametrize("key", NUMBER_KEYS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_numbers_outside_their_range_are_refused_and_inside_kept(key, data):
    group = _groups_with(key)
    accepts = settings_keys(group)[key]
    field = key.rsplit(".", 1)[-1]
    low = accepts.low if accepts.low is not None else -1e12
    high = accepts.high if accepts.high is not None else 1e12
    if accepts.kind == "int":
        inside = data.draw(st.integers(int(low) + accepts.low_open, int(high) - accepts.high_open))
        outside = data.draw(
            st.one_of(
                *([st.integers(max_value=int(low) - 1 + accepts.low_open)] if accepts.low is not None else []),
                *([st.integers(min_value=int(high) + 1 - accepts.high_open)] if accepts.high is not None else []),
            )
        )
    else:
        inside = data.draw(
            st.floats(low, high, exclude_min=accepts.low_open, exclude_max=accepts.high_open, allow_nan=False)
        )
        outside = data.draw(
            st.one_of(
                *([st.floats(max_value=low, exclude_max=not accepts.low_open)] if accepts.low is not None else []),
                *([st.floats(min_value=high, exclude_min=not accepts.high_open)] if accepts.high is not None else []),
                st.just(float("nan")),
            )
        )
    kept = group(**{**CONTEXT.get(key, {}), field: inside})
    assert getattr(kept, field) == inside
    with pytest.raises(ConfigError) as info:
        group(**{field: outside})
    assert str(info.value).startswith(f"{key}=") and "\n" not in str(info.value)


# commands a user types, each with one bad value: exit 1, one line on stderr naming the key, and nothing made
# (no run folder, no cache folder: the check ran before any model, extraction or corpus read)
BAD_COMMANDS = [
    ("evaluate.py", "speat.n_permutations=-5", "speat.n_permutations"),
    ("evaluate.py", "seed=abc", "seed"),
    ("evaluate.py", "extraction.batch_size=0", "extraction.batch_size"),
    ("evaluate.py", "task=wer_disparity task.glmm.confidence=1.5", "task.glmm.confidence"),
    ("evaluate.py", "task=spoken_stereoset task.sampling.top_p=0", "task.sampling.top_p"),
    ("train.py", "max_steps=0", "max_steps"),
    ("train.py", "lr=abc", "lr"),
    ("train.py", "extraction.batch_size=0", "extraction.batch_size"),
    ("train.py", "ser_data.dev_fraction=1", "ser_data.dev_fraction"),
]


@pytest.mark.parametrize("script, overrides, key", BAD_COMMANDS)
def test_a_bad_value_typed_on_the_command_line_is_one_line_and_exit_1(repo_root, tmp_path, script, overrides, key):
    import subprocess
    import sys

    outputs, cache = tmp_path / "outputs", tmp_path / "cache"
    result = subprocess.run(
        [
            sys.executable,
            str(repo_root / script),
            *overrides.split(),
            f"paths.output_root={outputs}",
            f"paths.cache_dir={cache}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}="), result.stderr
    assert not outputs.exists() and not cache.exists()  # no run folder, nothing extracted or indexed


def test_the_checks_know_the_components_own_choices():
    from speechbias.launch import component_settings
    from speechbias.report.tracker import KINDS
    from speechbias.report.wandb_run import MODES
    from speechbias.stimuli.bias_test import RESAMPLING_DESIGNS

    assert component_settings.TRACKER_KINDS == KINDS
    assert component_settings.WANDB_MODES == MODES
    assert component_settings.RESAMPLING_DESIGNS == RESAMPLING_DESIGNS
    from speechbias.upstream.hf import DTYPES

    assert set(component_settings.UPSTREAM_DTYPES) == set(DTYPES)
    from speechbias.stats.corrections import METHOD_NAMES
    from speechbias.tasks.report_checks import CORRECTION_METHODS

    assert CORRECTION_METHODS == METHOD_NAMES


def test_the_shared_checks_import_no_pandas_or_torch():
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from speechbias.launch.config_checks import shared_settings\n"
        "shared_settings()\n"
        "print(','.join(m for m in ('pandas', 'torch') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


# every option of the groups whose options bring their own keys, composed into the entry point that uses it;
# a required value (???) is given
OPTION_GROUPS = {
    "upstream": ("evaluate", ["task=speat"], ()),
    "bias_test": ("evaluate", ["task=speat"], ()),
    "trainer": ("train", [], train_ser_checks.SETTINGS),
    "logger": ("evaluate", ["task=speat"], ()),
    "ser_data": ("train", [], train_ser_checks.SETTINGS),
    "asr": ("evaluate", ["task=wer_disparity"], WER_DISPARITY_SETTINGS),
    "corpus": ("evaluate", ["task=wer_disparity"], WER_DISPARITY_SETTINGS),
    "sllm": ("evaluate", ["task=spoken_stereoset"], SPOKEN_STEREOSET_SETTINGS),
}
REQUIRED_GIVEN = {
    "corpus=asr_manifest": ["corpus.load.manifest=m.csv", "corpus.load.category_columns=[gender]"],
    "upstream=s3prl": ["upstream.name=fbank"],
}


def _options(conf_dir, group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


@pytest.mark.parametrize("group", list(OPTION_GROUPS))
def test_every_leaf_of_every_option_of_a_group_is_checked_and_its_defaults_pass(conf_dir, tmp_path, group):
    from speechbias.launch.config_checks import check_values

    name, overrides, groups = OPTION_GROUPS[group]
    accepted = accepted_settings(groups)
    options = _options(conf_dir, group)
    assert options
    for option in options:
        chosen = f"{group}={option}"
        cfg = compose_entry(conf_dir, name, [*overrides, chosen, *REQUIRED_GIVEN.get(chosen, [])], tmp_path)
        unchecked = [
            leaf
            for leaf in leaves(cfg)
            if leaf.startswith(group + ".") and setting_of(leaf, accepted) is None and not not_a_setting(leaf)
        ]
        assert not unchecked, f"{chosen}: leaves neither checked nor listed in NOT_SETTINGS: {unchecked}"
        check_values(cfg, (*shared_settings(), *groups))


def test_a_bad_value_among_a_sweeps_values_stops_the_sweep_before_any_job(repo_root, tmp_path):
    import subprocess
    import sys

    multirun = tmp_path / "multirun"
    result = subprocess.run(
        [
            sys.executable,
            str(repo_root / "evaluate.py"),
            "-m",
            "speat.n_permutations=-5,10",
            f"paths.multirun_root={multirun}",
            f"paths.cache_dir={tmp_path / 'cache'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1, result.stderr
    assert errors == ["error: speat.n_permutations=-5: must be an integer >= 1 (permutations of the one-sided p)"]
    assert not multirun.exists()  # no job launched
