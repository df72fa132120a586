"""A warm `python evaluate.py` (every clip cached): no loop, no Trainer, no model, no Lightning, no pandas or
scipy, and for a weight-free upstream no torch (a one-pair job and a list job); its files are those of the
run that extracted. A run with clips missing,
or of several processes, keeps the extraction loop."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from speechbias.features.cache import FeatureCache
from speechbias.launch.entry import job_trainer_config, run_task
from speechbias.launch.slurm.job_environment import SlurmTasks
from speechbias.tasks.speat import single_process

REPO = Path(__file__).resolve().parents[2]
# every file of a run that says what it computed (the W&B run folder and the logs hold timestamps)
RUN_FILES = (
    "results.csv",
    "results.json",
    "layers.csv",
    "layers.json",
    "report.md",
    "tracker_log.jsonl",
    "config.yaml",
)
# the default demo (fbank on demo_voice) with fewer permutations, so a cold run stays short
SMALL = ("speat.n_permutations=2000", "logger=none")
HEAVY_MODULES = (
    "pytorch_lightning",
    "lightning_fabric",
    "torch",
    "transformers",
    "torchaudio",
    "matplotlib",
    "scipy",
    "pandas",
)


def _evaluate(run_dir: Path, cache: Path, *overrides: str) -> set[str]:
    """`python evaluate.py` as the user types it (with this checkout's package), into ``run_dir`` with the
    feature cache ``cache``; returns the top-level modules the process imported (``-X importtime``)."""
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        WANDB_MODE="offline",
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "evaluate.py",
            f"hydra.run.dir={run_dir}",
            f"paths.cache_dir={cache}",
            *overrides,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {m.split(".")[0] for m in re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.M)}


def _forwards_apart(run: Path, name: str) -> tuple[str, int]:
    """A run file's text with its ``n_upstream_forwards`` value taken out, and that value (-1: none)."""
    text = (run / name).read_text(encoding="utf-8")
    if name == "results.json":
        rows = json.loads(text)
        n = rows[0].pop("n_upstream_forwards")
        return json.dumps(rows), n
    if name == "results.csv":
        table = pd.read_csv(run / name)
        n = int(table.pop("n_upstream_forwards").iloc[0])
        return table.to_csv(index=False), n
    return text, -1


def test_warm_run_writes_the_cold_runs_files_without_lightning_or_torch(tmp_path):
    cache = tmp_path / "cache"
    cold_modules = _evaluate(tmp_path / "cold", cache, *SMALL)
    warm_modules = _evaluate(tmp_path / "warm", cache, *SMALL)
    assert "pytorch_lightning" in cold_modules  # the import record sees what a run imports
    assert not warm_modules & set(HEAVY_MODULES), sorted(warm_modules & set(HEAVY_MODULES))
    for name in RUN_FILES:
        (cold_text, cold_n), (warm_text, warm_n) = (_forwards_apart(tmp_path / r, name) for r in ("cold", "warm"))
        assert warm_text == cold_text, name
        if name.startswith("results."):
            assert (cold_n, warm_n) == (40, 0), name  # the one column that says what the run had to do


def test_a_warm_list_job_writes_the_cold_jobs_files_without_pandas_torch_or_scipy(tmp_path):
    cache, lists = tmp_path / "cache", ("bias_test=[demo_voice,demo_accent]", *SMALL)
    cold_modules = _evaluate(tmp_path / "cold", cache, *lists)
    warm_modules = _evaluate(tmp_path / "warm", cache, *lists)
    assert "pandas" in cold_modules or "pytorch_lightning" in cold_modules  # the record sees the cold job's
    assert not warm_modules & set(HEAVY_MODULES), sorted(warm_modules & set(HEAVY_MODULES))
    for pair in ("demo_voice/mean_sum", "demo_accent/mean_sum"):
        for name in RUN_FILES:
            if name == "config.yaml":  # it names the pair's folder
                continue
            cold, warm = (_forwards_apart(tmp_path / r / pair, name) for r in ("cold", "warm"))
            assert warm[0] == cold[0], (pair, name)
            if name.startswith("results."):
                assert cold[1] > 0 and warm[1] == 0, (pair, name)


def _compose(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(
            "evaluate",
            overrides=[
                f"paths.output_dir={tmp_path / 'out'}",
                f"paths.cache_dir={tmp_path / 'cache'}",
                f"paths.root_dir={REPO}",
                "trainer.enable_progress_bar=false",
                *SMALL,
                *overrides,
            ],
        )


def _result_files(out: Path) -> dict[str, str]:
    return {name: _forwards_apart(out, name)[0] for name in RUN_FILES if name != "config.yaml"}


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_partly_cached_run_extracts_what_is_missing(tmp_path, damage):
    """One clip's entry gone (or overwritten): the run takes the loop and forwards that clip only."""
    first = run_task(_compose(tmp_path))
    files = _result_files(tmp_path / "out")
    cache = FeatureCache(tmp_path / "cache")
    entry = next(iter(sorted((tmp_path / "cache" / "stats" / first["fingerprint"]).rglob("*.safetensors"))))
    if damage == "missing":
        entry.unlink()
    else:
        entry.write_bytes(entry.read_bytes()[:-8] + b"\x00" * 8)
    again = run_task(_compose(tmp_path, "force=true"))
    assert (first["n_upstream_forwards"], again["n_upstream_forwards"]) == (40, 1)
    assert _result_files(tmp_path / "out") == files
    sha = entry.stem
    assert cache.get(first["fingerprint"], sha) is not None  # written again, valid


def test_a_warm_run_in_process_reads_the_cache_once_and_forwards_nothing(tmp_path, monkeypatch):
    run_task(_compose(tmp_path))
    import speechbias.features.extraction as extraction

    def no_loop(*args, **kwargs):
        raise AssertionError("a warm one-process run must not run the extraction loop")

    monkeypatch.setattr(extraction, "extract_statistics", no_loop)
    monkeypatch.setattr(extraction, "run_extraction", no_loop)
    again = run_task(_compose(tmp_path, "force=true"))
    assert again["n_upstream_forwards"] == 0


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ((), True),  # trainer=cpu: one device
        (("trainer=gpu",), True),
        (("trainer=ddp_sim",), False),
        (("trainer=ddp",), False),
        (("trainer=ddp_spawn",), False),
        (("trainer.devices=2",), False),
        (("+trainer.num_nodes=2",), False),
    ],
)
def test_only_a_one_process_trainer_takes_the_warm_path(tmp_path, overrides, expected):
    cfg = _compose(tmp_path, *overrides)
    assert single_process(instantiate(cfg.trainer)) is expected


@pytest.mark.filterwarnings("ignore:The `srun` command is available")
def test_a_slurm_job_of_several_tasks_or_a_launched_rank_keeps_the_loop(tmp_path, monkeypatch):
    cfg = _compose(tmp_path, "trainer=ddp_sim")
    tasks = SlurmTasks(job_id="1", ntasks=2, tasks_per_node=2, nodes=1, procid=0)
    assert not single_process(instantiate(job_trainer_config(cfg.trainer, tasks=tasks, multirun=False)))
    one_task = SlurmTasks(job_id="1", ntasks=1, tasks_per_node=1, nodes=1, procid=0)
    assert single_process(instantiate(job_trainer_config(_compose(tmp_path).trainer, tasks=one_task, multirun=False)))
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun or another launcher started this process as one of 2
    assert not single_process(instantiate(_compose(tmp_path).trainer))
    assert not single_process(lambda **kwargs: None)  # a factory it cannot read
    assert isinstance(instantiate(_compose(tmp_path).trainer), functools.partial)


@pytest.mark.slow
def test_a_warm_ddp_run_keeps_the_loop_and_writes_the_same_files(tmp_path):
    """trainer=ddp_sim (2 spawned processes) on a warm cache: the ranks meet in the loop, which forwards
    nothing, and the files are those of the one-process warm run."""
    cache = tmp_path / "cache"
    _evaluate(tmp_path / "cold", cache, *SMALL)
    _evaluate(tmp_path / "warm", cache, *SMALL)
    ddp_modules = _evaluate(tmp_path / "ddp", cache, *SMALL, "trainer=ddp_sim")
    assert "pytorch_lightning" in ddp_modules
    for name in RUN_FILES:
        if name != "config.yaml":  # it names the trainer
            assert (tmp_path / "ddp" / name).read_bytes() == (tmp_path / "warm" / name).read_bytes(), name


def test_a_run_writes_the_same_files_whichever_kernels_serve_its_statistics(tmp_path, monkeypatch):
    """One run (extracting) decides its kernels by itself: under auto its SE curve stays on the numpy kernels;
    forced onto the compiled ones (SPEECHBIAS_STATS_KERNELS=compiled) it writes the same files."""
    from speechbias.stats import bootstrap, kernel_choice

    monkeypatch.delenv(kernel_choice.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(kernel_choice, "_forgone", 0.0)
    # as in a fresh process: the kernels not set up yet (an earlier test of this process may have set them up)
    monkeypatch.delitem(sys.modules, "speechbias.stats.compiled_kernels", raising=False)
    real_choice, choices = bootstrap.use_compiled_kernels, []
    monkeypatch.setattr(
        bootstrap, "use_compiled_kernels", lambda *args: choices.append(real_choice(*args)) or choices[-1]
    )
    run_task(_compose(tmp_path, "speat.se_curve=true", "speat.n_resamples=500"))  # one run (extracts): numpy
    single = _result_files(tmp_path / "out")
    assert choices and not any(choices)
    choices.clear()
    monkeypatch.setenv(kernel_choice.ENVIRONMENT_VARIABLE, "compiled")
    run_task(_compose(tmp_path, "speat.se_curve=true", "speat.n_resamples=500", "force=true"))
    assert choices and all(choices)
    assert _result_files(tmp_path / "out") == single
