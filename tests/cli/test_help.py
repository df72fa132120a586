"""`python train.py --help` and `python evaluate.py --help` as typed: each says what every option of the
groups it uses is, lists the launchers, and train.py's lists no evaluate-only group."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf"


@cache
def _help(entry: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / f"{entry}.py"), "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _groups_of(entry: str) -> set[str]:
    """The config groups of the entry point's defaults list (read here from its YAML, independently)."""
    defaults = yaml.safe_load((CONF / f"{entry}.yaml").read_text())["defaults"]
    return {k for d in defaults if isinstance(d, dict) for k in d if not k.startswith(("override", "/"))}


@pytest.mark.parametrize("entry", ["train", "evaluate"])
def test_every_option_of_every_group_has_a_description(entry):
    text = _help(entry)
    shown = set(re.findall(r"^  (\w+): ", text, flags=re.M))
    assert shown == _groups_of(entry) - {"paths", "sweep"}
    for group in shown - {"aggregation", "experiment"}:
        for option in sorted((CONF / group).glob("*.yaml")):
            line = re.search(rf"^    {option.stem}( \(default\))?\s{{2,}}(\S.*)$", text, flags=re.M)
            assert line, f"{group}={option.stem} is not listed with a description"
            assert len(line.group(2)) > 10
    for launcher in ("basic (default)", "parallel", "slurm"):
        assert re.search(rf"^    {re.escape(launcher)}\s{{2,}}\S", text, flags=re.M), launcher
    assert f"python {entry}.py --cfg job" in text and "--hydra-help" in text  # Hydra's own flags follow


def test_train_lists_its_own_groups_and_experiments_only():
    train, evaluate = _help("train"), _help("evaluate")
    for evaluate_only in ("aggregation", "task", "bias_test", "asr", "corpus", "sllm", "selection"):
        assert not re.search(rf"^  {evaluate_only}: ", train, flags=re.M), evaluate_only
        assert re.search(rf"^  {evaluate_only}: ", evaluate, flags=re.M), evaluate_only
    assert re.search(r"^    paper_propagation\s", train, flags=re.M)
    assert not re.search(r"^    paper_speat\s", train, flags=re.M)
    assert re.search(r"^    paper_speat\s", evaluate, flags=re.M)
    assert not re.search(r"^    paper_propagation\s", evaluate, flags=re.M)
    assert re.search(r"^    lr\s{2,}learning rate", train, flags=re.M)
