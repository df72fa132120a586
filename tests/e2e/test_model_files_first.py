"""A command whose model's files cannot be had answers before torch, transformers or Lightning is imported.

Typed as a user types it (a subprocess, offline, ``HF_HOME`` an empty folder, so no model is cached): no
weights in the Hugging Face cache, a local model folder that does not exist or holds no weights, a random
control without its config. Each prints one line and exits 1; the process's own import record
(``python -X importtime``: one line per module imported, on stderr) shows that none of the heavy libraries was
imported. A missing data folder and missing weights are named together, in one line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from entry_commands import run_entry

HEAVY = ("torch", "transformers", "pytorch_lightning", "lightning", "lightning_fabric")
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", re.M)
HINT = "(HYDRA_FULL_ERROR=1 shows the traceback)"


def _typed(tmp_path: Path, script: str, *overrides: str) -> tuple[int, list[str], set[str]]:
    """Exit code, the console lines (the import record left out) and the top-level modules imported."""
    proc = run_entry(
        script,
        *overrides,
        f"paths.output_root={tmp_path / 'outputs'}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        python_flags=("-X", "importtime"),
        timeout=300,
        env={"HF_HOME": str(tmp_path / "empty_hf_home"), "HYDRA_FULL_ERROR": ""},
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and not ln.startswith("import time:")]
    modules = {name.split(".")[0] for name in IMPORTED.findall(proc.stderr)}
    return proc.returncode, lines, modules


def _one_line_before_heavy_imports(tmp_path: Path, script: str, *overrides: str) -> str:
    rc, lines, modules = _typed(tmp_path, script, *overrides)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and lines[0].endswith(HINT), lines[0]
    # the record is there (the check itself reads the Hugging Face cache through huggingface_hub) ...
    assert {"hydra", "omegaconf", "huggingface_hub"} <= modules, sorted(modules)
    # ... and holds none of the heavy libraries
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert not (tmp_path / "outputs").exists()  # no run folder made
    return lines[0]


def test_a_paper_model_without_weights_in_the_cache(tmp_path):
    line = _one_line_before_heavy_imports(tmp_path, "train.py", "upstream=hubert_xl", "lr=1e-4")
    assert "cannot load the config and weights of model 'facebook/hubert-xlarge-ll60k'" in line
    assert "offline (HF_HUB_OFFLINE=1)" in line and "`hf download facebook/hubert-xlarge-ll60k`" in line


def test_a_local_model_folder_that_does_not_exist(tmp_path):
    assert not Path("/missing/dir").exists()
    line = _one_line_before_heavy_imports(tmp_path, "train.py", "upstream=hf", "model_id=/missing/dir")
    assert "model_id '/missing/dir' looks like a local directory but does not exist" in line


def test_a_random_control_without_its_config_asks_for_the_config_only(tmp_path):
    line = _one_line_before_heavy_imports(tmp_path, "train.py", "upstream=hubert_xl", "upstream.randomize=true")
    assert "only config.json and preprocessor_config.json are needed (not the weights)" in line
    assert "`hf download facebook/hubert-xlarge-ll60k config.json preprocessor_config.json`" in line


def test_a_local_model_folder_without_weights(tmp_path):
    folder = tmp_path / "my-wavlm"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "wavlm"}')
    line = _one_line_before_heavy_imports(tmp_path, "evaluate.py", "upstream=hf", f"model_id={folder}")
    assert f"cannot load the weights of model '{folder}'" in line
    assert f"no weights file (model.safetensors / pytorch_model.bin) in {folder}" in line


@pytest.mark.parametrize("script, test_key", [("evaluate.py", "bias_test"), ("train.py", "bias_tests")])
def test_missing_data_and_missing_weights_are_named_together(tmp_path, script, test_key):
    data_root = tmp_path / "speat"  # `paths.data_root=/data/speat` where no such folder is
    test = "bias_test=female_male" if test_key == "bias_test" else "bias_tests=[female_male]"
    line = _one_line_before_heavy_imports(tmp_path, script, "upstream=hubert_xl", test, f"paths.data_root={data_root}")
    data, _, model = line.partition("; also: ")
    assert data.startswith(f"error: paths.data_root={data_root}: no such folder;"), line
    assert "speech_accent_archive" in data and "hubert" not in data
    assert model.startswith("cannot load the config and weights of model 'facebook/hubert-xlarge-ll60k'"), line
