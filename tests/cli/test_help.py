"""`python train.py --help` and `python evaluate.py --help` as typed: each says what every option of the
groups it uses is, lists the launchers, and train.py's lists no evaluate-only group; each main key's text is
its settings field's (doc, what it accepts, a default only where a run with no overrides gets it), and the
help imports no torch, pandas, Lightning or transformers."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import dataclasses

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from speechbias.checked_settings import ACCEPTS
from tests.entry_commands import import_probe
from speechbias.launch.config_checks import shared_settings
from speechbias.tasks import report_checks, train_ser_checks
from speechbias.tasks.spoken_stereoset_settings import SETTINGS as SPOKEN_STEREOSET_SETTINGS
from speechbias.tasks.wer_disparity_settings import SETTINGS as WER_DISPARITY_SETTINGS

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
    assert re.search(r"^    lr\s{2,}\S", train, flags=re.M)


# the settings groups of each entry point's configs: the shared ones and its tasks' own
ENTRY_GROUPS = {
    "evaluate": (*report_checks.SETTINGS, *WER_DISPARITY_SETTINGS, *SPOKEN_STEREOSET_SETTINGS),
    "train": train_ser_checks.SETTINGS,
}
# train.py's bias_tests: names or inline configs (strings or mappings), no settings field
NOT_SETTINGS = {"bias_tests"}
# the main keys a user most needs, each with the default a run with no overrides gets
EXPECTED_DEFAULTS = {
    "evaluate": {"seed": 0, "force": False, "speat.n_permutations": 1_000_000, "speat.se_curve": False},
    "train": {"lr": 1e-4, "seed": 0, "force": False},
}


def _fields(entry: str) -> dict[str, dataclasses.Field]:
    """User key -> settings field, read from the settings classes' dataclass fields."""
    found = {}
    for group in (*shared_settings(), *ENTRY_GROUPS[entry]):
        for field in dataclasses.fields(group):
            if ACCEPTS in field.metadata:
                found.setdefault(f"{group.NODE}.{field.name}" if group.NODE else field.name, field)
    return found


def _main_keys(text: str) -> dict[str, str]:
    """Key -> its text (continuation lines joined) of the help's "Main keys" block."""
    block = text.split("Main keys (key=value):\n", 1)[1].split("\n\n", 1)[0]
    keys: dict[str, str] = {}
    last = None
    for line in block.splitlines():
        named = re.match(r"^    (\S+)\s{2,}(\S.*)$", line)
        if named:
            last = named.group(1)
            keys[last] = named.group(2)
        else:
            assert last and re.match(rf"^ {{{4 + 30 + 2}}}\S", line), f"not a key's line: {line!r}"
            keys[last] += " " + line.strip()
    return keys


def _composed_default(entry: str, key: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(entry, overrides=[])
    return OmegaConf.select(cfg, key)


@pytest.mark.parametrize("entry", ["train", "evaluate"])
def test_each_main_key_is_described_by_its_settings_field(entry):
    text = _help(entry)
    keys = _main_keys(text)
    fields = _fields(entry)
    assert set(EXPECTED_DEFAULTS[entry]) <= set(keys)
    for key, described in keys.items():
        if key in NOT_SETTINGS:
            assert len(described) > 10, key
            continue
        assert key in fields, f"{key} is shown but is no settings field of {entry}.py"
        field = fields[key]
        assert described.startswith(field.metadata["doc"] + ";"), (key, described)
        assert field.metadata[ACCEPTS].describe() in described, (key, described)
        shown = re.search(r", default (\S+)$", described)
        if key in EXPECTED_DEFAULTS[entry]:
            assert shown, f"{key}: no default shown: {described!r}"
        if shown:
            # the default shown is the field's and what a run with no overrides gets
            value = yaml.safe_load(shown.group(1))
            default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            assert value in (default, *(default if isinstance(default, tuple) else ())), (key, value, default)
            assert value == _composed_default(entry, key), (key, value)
    # a default the entry's YAML derives from another key (max_steps from ser_data.max_steps) is not shown
    if entry == "train":
        assert "default" not in keys["max_steps"] and keys["max_steps"].startswith(fields["max_steps"].metadata["doc"])
    block = text.split("Main keys (key=value):\n", 1)[1].split("\n\n", 1)[0]
    assert all(len(line) <= 4 + 30 + 2 + 110 for line in block.splitlines()), block


# runs an entry script as typed and writes which heavy modules it imported
IMPORT_PROBE = import_probe(("torch", "pandas", "pytorch_lightning", "lightning", "transformers"))


@pytest.mark.parametrize("entry", ["train", "evaluate"])
def test_help_imports_no_torch_pandas_or_lightning(entry, tmp_path):
    probe = tmp_path / "imported.txt"
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(REPO / f"{entry}.py"), str(probe), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Main keys (key=value):" in proc.stdout
    assert probe.read_text() == ""
