"""`aggregation=[mean_sum,max_q3]` (a list where a run takes one option of a config group): Hydra merges the
options into one config and the run computed only the last one, exiting 0. Now one line, exit 1, before
anything runs; lists of values (train.py's lr=[...], bias_tests=[...]) are untouched."""

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
    ("override", "group"),
    [("aggregation=[mean_sum,max_q3]", "aggregation"), ("bias_test=[demo_voice,demo_accent]", "bias_test")],
)
def test_a_list_of_group_options_is_refused_naming_the_sweep_to_run(override, group):
    with pytest.raises(ConfigError, match=rf"^{group}=\[.*\]: a run takes one {group}; .* -m {group}=\S+,\S+$"):
        check_group_options([override], REPO / "conf")
    check_group_options([override.replace("[", "").replace("]", "")], REPO / "conf")  # the sweep form passes
    check_group_options(["lr=[1e-3,1e-4]", "bias_tests=[demo_voice,demo_accent]"], REPO / "conf")


def test_as_typed_it_is_one_line_and_exit_1_with_nothing_computed(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    command = [sys.executable, str(REPO / "evaluate.py"), "aggregation=[mean_sum,max_q3]", "logger=none"]
    proc = subprocess.run(
        [*command, f"paths.output_root={tmp_path / 'out'}"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "compute only max_q3" in lines[0] and "-m aggregation=mean_sum,max_q3" in lines[0]
    assert not (tmp_path / "out").exists()
