"""The GPU paths as a user types them: extraction (``evaluate.py trainer=gpu``) and training
(``train.py trainer=gpu``) on a CUDA device, against the same commands on the CPU.

Skipped where no CUDA device is visible (CI has none); run on a GPU machine with
``python -m pytest -q -m gpu tests/gpu``. ``SPEECHBIAS_GPU_TEST_ACCELERATOR=cpu`` runs them with the CPU in
the GPU's place (the plumbing only: both sides are then the same computation).

What is compared and why the tolerances:

* SpEAT d per layer, CPU vs GPU, float32. On CUDA, cuDNN convolutions may use TF32 (PyTorch's default for
  convolutions), and summation order differs: the statistics differ in their last digits, never in sign or
  by more than 1e-3 in d (an effect size of order 0.1-2).
* The same extraction at batch size 1 and 8 on the GPU: padding and valid lengths (the upstream contract)
  must not move a clip's statistics: d equal to 1e-4.
* bfloat16 Whisper on the GPU against float32 on the GPU: bf16 keeps 8 bits of mantissa, so d within 0.05.
* The valence head trained on the GPU vs the CPU (300 steps, float32): dev MSE and Cohen's d within 1e-3
  relative, the sign of every d equal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from entry_commands import run_entry

ACCELERATOR = os.environ.get("SPEECHBIAS_GPU_TEST_ACCELERATOR", "gpu")


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(ACCELERATOR == "gpu" and not _cuda_visible(), reason="no CUDA device visible"),
]


def _run(script: str, tmp_path: Path, name: str, *overrides: str) -> Path:
    """Runs ``python <script> <overrides>`` into ``tmp_path/name`` with a cache of its own; the run folder."""
    run = tmp_path / name
    settings = [f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / f'{name}_cache'}", "logger=none"]
    proc = run_entry(script, *settings, "trainer.enable_progress_bar=false", *overrides, timeout=900)
    assert proc.returncode == 0, f"{script} {' '.join(overrides)}\n{proc.stderr[-3000:]}"
    return run


def _layer_d(run: Path) -> pd.Series:
    layers = pd.read_csv(run / "layers.csv")
    return layers.set_index(["test", "layer"])["d"].sort_index()


def _layer_d_difference(tmp_path: Path, upstream: str, one: tuple[str, ...], other: tuple[str, ...]) -> float:
    """The largest |d| difference over every layer between two ``evaluate.py`` runs of ``upstream`` (d per
    layer, 1,000 permutations), ``one`` and ``other`` their own overrides; printed with what was compared."""
    common = [f"upstream={upstream}", "speat.per_layer=true", "speat.n_permutations=1000"]
    a = _layer_d(_run("evaluate.py", tmp_path, "one", *common, *one))
    b = _layer_d(_run("evaluate.py", tmp_path, "other", *common, *other))
    assert list(a.index) == list(b.index) and a.notna().all() and b.notna().all()
    difference = float((a - b).abs().max())
    print(f"{upstream} {' '.join(one)} vs {' '.join(other)}: max |d| difference over {len(a)} layers {difference:.3g}")
    return difference


@pytest.mark.parametrize("upstream", ["tiny_wav2vec2", "tiny_whisper", "tiny_wavlm", "random_wav2vec2_base"])
def test_speat_on_the_gpu_equals_the_cpu(tmp_path, upstream):
    assert _layer_d_difference(tmp_path, upstream, ("trainer=cpu",), (f"trainer={ACCELERATOR}",)) < 1e-3


def test_gpu_extraction_is_batch_invariant(tmp_path):
    batches = [(f"trainer={ACCELERATOR}", f"extraction.batch_size={n}") for n in (1, 8)]
    assert _layer_d_difference(tmp_path, "tiny_wav2vec2_stable", *batches) < 1e-4


def test_bfloat16_whisper_on_the_gpu(tmp_path):
    fp32 = (f"trainer={ACCELERATOR}",)
    assert _layer_d_difference(tmp_path, "tiny_whisper", fp32, (*fp32, "upstream.dtype=bfloat16")) < 0.05


def test_training_on_the_gpu_equals_the_cpu(tmp_path):
    common = ["upstream=tiny_wav2vec2", "max_steps=300", "lr=1e-3"]
    cpu = pd.read_csv(_run("train.py", tmp_path, "cpu", *common, "trainer=cpu") / "results.csv")
    gpu = pd.read_csv(_run("train.py", tmp_path, "gpu", *common, f"trainer={ACCELERATOR}") / "results.csv")
    assert list(gpu["test"]) == list(cpu["test"])
    for column in ("best_dev_mse", "cohens_d", "mean_pred_x", "mean_pred_y"):
        relative = ((gpu[column] - cpu[column]).abs() / cpu[column].abs().clip(lower=1e-6)).max()
        print(f"train {column}: max relative difference GPU vs CPU = {relative:.3g}")
        assert relative < 1e-3, (column, cpu[column].tolist(), gpu[column].tolist())
    assert (gpu["cohens_d"] > 0).tolist() == (cpu["cohens_d"] > 0).tolist()
