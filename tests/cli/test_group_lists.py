"""`upstream=[fbank,mfcc]` (a list where a run takes one option of a config group): Hydra merges the
options into one config and the run computed only the last one, exiting 0. Now one line, exit 1, before
anything runs. A SpEAT job takes lists of bias tests and aggregations (every pair from one read of the
cache: tests/e2e/test_speat_pairs.py); lists of values (train.py's lr=[...], bias_tests=[...]) are untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speechbias.errors import ConfigError
from speechbias.launch.config_checks import check_group_options

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("overrides", "group"),
    [
        (["upstream=[fbank,mfcc]"], "upstream"),
        (["task=report", "aggregation=[mean_sum,max_q3]"], "aggregation"),  # only a SpEAT job takes lists
        (["task=wer_disparity", "bias_test=[demo_voice,demo_accent]"], "bias_test"),
    ],
)
def test_a_list_of_group_options_is_refused_naming_the_sweep_to_run(overrides, group):
    with pytest.raises(ConfigError, match=rf"^{group}=\[.*\]: a run takes one {group}; .* -m {group}=\S+,\S+$"):
        check_group_options(overrides, REPO / "conf")
    check_group_options([o.replace("[", "").replace("]", "") for o in overrides], REPO / "conf")  # the sweep form
    check_group_options(["lr=[1e-3,1e-4]", "bias_tests=[demo_voice,demo_accent]"], REPO / "conf")


def test_a_speat_job_takes_lists_of_bias_tests_and_aggregations():
    check_group_options(["bias_test=[demo_voice,demo_accent]", "aggregation=[mean_sum,max_q3]"], REPO / "conf")
    check_group_options(["task=speat", "aggregation=[mean_sum,max_q3]"], REPO / "conf")


def test_as_typed_it_is_one_line_and_exit_1_with_nothing_computed(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    command = [sys.executable, str(REPO / "evaluate.py"), "upstream=[fbank,mfcc]", "logger=none"]
    proc = subprocess.run(
        [*command, f"paths.output_root={tmp_path / 'out'}"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "compute only mfcc" in lines[0] and "-m upstream=fbank,mfcc" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_list_job_of_several_processes_is_one_line_and_exit_1(tmp_path):
    """A list job reads the cache once in one process; under DDP each job takes one pair."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    command = [
        sys.executable,
        str(REPO / "evaluate.py"),
        "bias_test=[demo_voice,demo_accent]",
        "trainer=ddp_sim",
        "logger=none",
        f"paths.output_root={tmp_path / 'out'}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "bias_test=[demo_voice,demo_accent]: a job of several pairs runs in one process" in lines[0]


@pytest.mark.parametrize(
    ("overrides", "group", "names"),
    [
        (["bias_test=[b,a,b]", "aggregation=[x,y]"], "bias_test", ["b", "a"]),  # order kept, repeats dropped
        (["bias_test=[b,a,b]", "aggregation=[x,y]"], "aggregation", ["x", "y"]),
        (["bias_test=[a,b]", "bias_test=c"], "bias_test", []),  # the last override names one option
        (["bias_test=c", "bias_test=[a,b]"], "bias_test", ["a", "b"]),
        (["bias_test=[a,b]", "~bias_test"], "bias_test", ["a", "b"]),  # a delete names no option
        (["+bias_test@other=[a,b]"], "bias_test", []),  # another package
        (["upstream=fbank"], "bias_test", []),
    ],
)
def test_the_listed_options_of_a_job(overrides, group, names):
    from omegaconf import OmegaConf

    from speechbias.run_context import listed_options

    cfg = OmegaConf.create({"hydra": {"overrides": {"task": overrides}}})
    assert listed_options(cfg, group) == names
    listed_options(cfg, group).append("changed")  # the caller's copy
    assert listed_options(cfg, group) == names
