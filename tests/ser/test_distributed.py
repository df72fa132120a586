"""DDP on CPU (2 gloo processes), Hydra multirun + DDP, and a run killed mid-training that resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch

from ser.helpers import REPO_ROOT, compose_train
from ser.test_training import DIM, HIGH, LAYERS, LOW, _data
from speechbias.launch.entry import run_task
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.fit import fit_trainer, fit_valence_head
from speechbias.ser.module import ValenceRegressor


def _ddp_sim_trainer(**kw):
    return pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kw,
    )


@pytest.mark.slow
@pytest.mark.parametrize("lr", [1e-2, [1e-2, 1e-3]], ids=["one_head", "two_heads"])
def test_two_process_ddp_trains_layer_weights_and_reports_the_whole_dev_split(tmp_path, lr):
    features, target, dev, rating = _data()
    pl.seed_everything(0, verbose=False)
    module = ValenceRegressor(LAYERS, DIM, hidden_size=16, lr=lr, valence_range=(LOW, HIGH))
    before = [h.layer_logits.detach().clone() for h in module.heads]
    trainer = fit_trainer(
        _ddp_sim_trainer, tmp_path, max_steps=4, val_every_n_epochs=1
    )  # 63 clips/2 ranks: 1 step/epoch
    dm = LayerMeansDataModule(features, target, dev, batch_size=32, seed=0, steps_per_call=4)  # 1 under DDP
    fit_valence_head(trainer, module, dm, tmp_path)
    assert trainer.world_size == 2
    for h, b in zip(module.heads, before):
        assert not torch.allclose(h.layer_logits.detach(), b)  # trained in the workers, sent back
    ckpt = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 4
    lrs = lr if isinstance(lr, list) else [lr]
    for k, lr_k in enumerate(lrs):
        last = [h for h in ckpt["dev_history"] if h["lr"] == lr_k][-1]
        assert last["step"] == 4 and last["n_dev"] == 9  # 9 dev clips over 2 ranks: the padded repeat is dropped
        prefix = f"heads.{k}."
        sd = {n[len(prefix) :]: v.double() for n, v in ckpt["state_dict"].items() if n.startswith(prefix)}
        w = torch.softmax(sd["layer_logits"], 0).numpy()
        mixed = np.tensordot(features[dev].astype(float), w, axes=([1], [0]))
        pred = (
            LOW
            + (HIGH - LOW)
            * (
                (mixed @ sd["project.weight"].numpy().T + sd["project.bias"].numpy()) @ sd["output.weight"].numpy().T
                + sd["output.bias"].numpy()
            )[:, 0]
        )
        assert last["mse"] == pytest.approx(np.mean((pred - rating[dev]) ** 2), rel=1e-5)


@pytest.mark.slow
def test_ddp_spawn_run_publishes_what_its_worker_wrote(tmp_path, wandb_recorder):
    """trainer=ddp_sim (ddp_spawn): the propagation callback runs in a spawned worker and writes
    through the run's writer; the parent returns the summary of the run folder and publishes the
    writer's record (one W&B run)."""
    started, logged = wandb_recorder
    out = tmp_path / "run"
    summary = run_task(
        compose_train(
            [
                f"paths.output_dir={out}",
                f"paths.cache_dir={tmp_path / 'cache'}",
                "trainer=ddp_sim",
                "logger=wandb",
                "max_steps=4",
                "ser_data.val_every_n_epochs=1",
                "bias_tests=[demo_voice]",
                "++trainer.enable_progress_bar=false",
            ]
        )
    )
    results = pd.read_csv(out / "results.csv")
    assert summary["propagation/demo_voice/cohens_d"] == pytest.approx(results["cohens_d"].iloc[0], rel=1e-12)
    assert len(started) == 1 and logged[-1] == ("finish",)
    assert sorted(e[1] for e in logged if e[0] == "table") == [
        "propagation/results",
        "ser/dev_curve",
        "ser/layer_weights",
    ]
    steps = [e[1]["trainer/step"] for e in logged if e[0] == "metrics" and "trainer/step" in e[1]]
    assert steps == list(pd.read_csv(out / "dev_curve.csv")["step"]) and steps
    assert sorted(k for e in logged if e[0] == "images" for k in e[1]) == [
        "propagation/demo_voice/predictions",
        "ser/dev_r2",
    ]  # fbank: one layer, no layer-weight figure


def _train_py(*args, cwd=REPO_ROOT, env_extra=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", **(env_extra or {})}
    return [sys.executable, str(REPO_ROOT / "train.py"), *args], env


@pytest.mark.slow
def test_multirun_with_ddp_runs_each_job_once(tmp_path):
    """`-m lr=a,b trainer.strategy=ddp`: plain DDP would re-launch the whole sweep in each child;
    the runner switches the job to ddp_spawn, so exactly one job folder per lr appears."""
    cmd, env = _train_py(
        "-m",
        "lr=1e-3,1e-4",
        "trainer=ddp_sim",
        "trainer.strategy=ddp",
        "max_steps=6",
        "ser_data.val_every_n_epochs=1",
        "bias_tests=[demo_voice]",
        "logger=none",
        "++trainer.enable_progress_bar=false",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p for p in (tmp_path / "sweep").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(jobs) == 2, [p.name for p in jobs]
    lrs = sorted(float(pd.read_csv(j / "results.csv")["lr"].iloc[0]) for j in jobs)
    assert lrs == [1e-4, 1e-3]
    assert "using strategy=ddp_spawn" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    # enough steps that the run cannot finish between the first last.ckpt and the kill (the CPU
    # fast path does ~1,000 steps a second: 1,200 steps once finished inside the 0.5 s wait)
    args = (
        "max_steps=8000",
        "checkpoint_every_n_epochs=2",
        "ser_data.val_every_n_epochs=20",
        "logger=none",
        "bias_tests=[demo_voice]",
        "++trainer.enable_progress_bar=false",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={run_dir}",
    )
    cmd, env = _train_py(*args)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = run_dir / "checkpoints" / "last.ckpt"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if last.is_file():
            time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be interrupted"
    assert not (run_dir / "results.csv").exists()
    step_at_kill = torch.load(last, weights_only=True)["global_step"]
    assert 0 < step_at_kill < 8000
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in (run_dir / "train.log").read_text()
    curve = pd.read_csv(run_dir / "dev_curve.csv")
    assert curve["step"].is_unique and curve["step"].is_monotonic_increasing
    assert curve["step"].iloc[-1] == 8000 and step_at_kill in set(curve["step"])
