"""Training the head with Lightning: dev metrics on the original scale, determinism, resume."""

from __future__ import annotations

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.fit import fit_trainer, fit_valence_head
from speechbias.ser.module import ValenceRegressor

N, LAYERS, DIM = 72, 3, 5  # 63 train clips -> 2 steps per epoch at batch 32; 9 dev clips
LOW, HIGH = 1.0, 5.0  # an EU-Emotion-like scale


def _data(seed=0):
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((N, LAYERS, DIM)).astype(np.float32)
    rating = np.clip(3 + features[:, 1, 0] + 0.3 * rng.standard_normal(N), LOW, HIGH)
    target = ((rating - LOW) / (HIGH - LOW)).astype(np.float32)
    dev = np.zeros(N, bool)
    dev[rng.permutation(N)[:9]] = True
    return features, target, dev, rating


def _make_trainer(**kw):
    return pl.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False, **kw
    )


def _fit(
    tmp,
    max_steps=6,
    seed=0,
    callbacks=(),
    data_seed=0,
    lr=1e-2,
    batch_size=32,
    steps_per_call=1,
    checkpoint_every_n_epochs=1,
    step_kernel="auto",
):
    features, target, dev, _ = _data()
    pl.seed_everything(seed, verbose=False)
    module = ValenceRegressor(LAYERS, DIM, hidden_size=16, lr=lr, valence_range=(LOW, HIGH), step_kernel=step_kernel)
    trainer = fit_trainer(
        _make_trainer,
        tmp / "checkpoints",
        max_steps=max_steps,
        val_every_n_epochs=1,
        callbacks=list(callbacks),
        checkpoint_every_n_epochs=checkpoint_every_n_epochs,
    )
    dm = LayerMeansDataModule(
        features, target, dev, batch_size=batch_size, seed=data_seed, steps_per_call=steps_per_call
    )
    fit_valence_head(trainer, module, dm, tmp / "checkpoints")
    return module, trainer


def test_dev_metrics_are_on_the_original_scale(tmp_path):
    module, trainer = _fit(tmp_path, max_steps=4)  # 2 epochs; the last validation sees the final weights
    features, _, dev, rating = _data()
    assert [h["step"] for h in module.dev_history] == [2, 4]
    h = module.head
    w = torch.softmax(h.layer_logits.detach().double(), 0).numpy()
    W1, b1 = h.project.weight.detach().double().numpy(), h.project.bias.detach().double().numpy()
    W2, b2 = h.output.weight.detach().double().numpy(), h.output.bias.detach().double().numpy()
    pred01 = np.array(
        [W2 @ (W1 @ np.tensordot(w, features[i].astype(float), axes=1) + b1) + b2 for i in np.flatnonzero(dev)]
    )[:, 0]
    pred = LOW + (HIGH - LOW) * pred01
    y = rating[dev]
    mse = np.mean((pred - y) ** 2)
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    last = module.dev_history[-1]
    assert last["n_dev"] == 9
    assert last["mse"] == pytest.approx(mse, rel=1e-5)
    assert last["r2"] == pytest.approx(r2, rel=1e-5, abs=1e-6)
    assert float(trainer.callback_metrics["ser/val/r2"]) == pytest.approx(r2, rel=1e-5, abs=1e-6)
    assert (tmp_path / "checkpoints" / "best.ckpt").is_file() and (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_same_seed_same_numbers_other_seed_other_numbers(tmp_path):
    a, _ = _fit(tmp_path / "a")
    b, _ = _fit(tmp_path / "b")
    c, _ = _fit(tmp_path / "c", seed=1, data_seed=1)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0, msg=name)
    assert a.dev_history == b.dev_history
    assert not torch.equal(a.head.project.weight, c.head.project.weight)


class _Crash(pl.Callback):
    def __init__(self, at_step):
        self.at_step = at_step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.at_step:
            raise RuntimeError("simulated interruption")


def test_interrupted_run_resumes_from_last_checkpoint_and_matches(tmp_path):
    full, _ = _fit(tmp_path / "full", max_steps=8)
    with pytest.raises(RuntimeError, match="simulated interruption"):
        _fit(tmp_path / "cut", max_steps=8, callbacks=[_Crash(5)])
    ckpt = torch.load(tmp_path / "cut" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 4  # written at the validation after epoch 2
    resumed, trainer = _fit(tmp_path / "cut", max_steps=8, seed=123)  # another init: the checkpoint wins
    assert trainer.global_step == 8
    for (name, pa), pb in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(pa, pb, rtol=1e-6, atol=1e-7, msg=name)
    assert [h["step"] for h in resumed.dev_history] == [2, 4, 6, 8]
    assert [h["mse"] for h in resumed.dev_history] == pytest.approx([h["mse"] for h in full.dev_history], rel=1e-6)


@pytest.mark.parametrize("batch_size, steps_per_call, max_steps", [(32, 3, 7), (8, 3, 19), (8, 8, 16)])
def test_several_steps_per_call_take_exactly_the_same_steps(tmp_path, batch_size, steps_per_call, max_steps):
    """Grouping optimiser steps into one Lightning call changes nothing but the speed, also when
    max_steps ends inside a group and when an epoch's last group is short (63 clips, batch 8:
    8 batches per epoch -> groups of 3, 3, 2)."""
    one, t_one = _fit(tmp_path / "one", max_steps=max_steps, batch_size=batch_size, lr=[1e-2, 1e-3])
    grouped, t_grouped = _fit(
        tmp_path / "grouped", max_steps=max_steps, batch_size=batch_size, lr=[1e-2, 1e-3], steps_per_call=steps_per_call
    )
    assert t_one.global_step == t_grouped.global_step == max_steps
    for (name, a), b in zip(one.state_dict().items(), grouped.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    # the same validations; when training ends inside an epoch's last group, that epoch still ends
    # and is validated once more (at max_steps)
    assert grouped.dev_history[: len(one.dev_history)] == one.dev_history and len(one.dev_history) > 0
    assert all(h["step"] == max_steps for h in grouped.dev_history[len(one.dev_history) :])


def test_step_chunk_sampler_groups_the_batches_in_order():
    from torch.utils.data import BatchSampler

    from speechbias.ser.datamodule import EpochSeededSampler, StepChunkSampler

    base = EpochSeededSampler(70, seed=3)
    chunks = list(StepChunkSampler(base, batch_size=8, steps=4))
    assert [len(c) for c in chunks] == [4, 4, 1] == [len(c) for c in chunks][: len(StepChunkSampler(base, 8, 4))]
    assert [b for c in chunks for b in c] == list(BatchSampler(base, 8, drop_last=False))
    with pytest.raises(ValueError, match="steps"):
        StepChunkSampler(base, batch_size=8, steps=0)


def test_last_checkpoint_every_n_epochs_and_best_heads_at_the_end(tmp_path):
    module, _ = _fit(tmp_path, max_steps=10, checkpoint_every_n_epochs=2, lr=[1e-2, 1e-4])  # 5 epochs of 2 steps
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 8 and "optimizer_states" in last  # epochs 2 and 4, not 5
    best = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)
    for k, lr in enumerate([1e-2, 1e-4]):
        mine = [h for h in module.dev_history if h["lr"] == lr]
        lowest = min(mine, key=lambda h: h["mse"])
        assert best["best_heads"][k]["step"] == lowest["step"] and best["best_heads"][k]["mse"] == lowest["mse"]
        for name, value in module.best[k]["state"].items():
            torch.testing.assert_close(best["state_dict"][f"heads.{k}.{name}"], value, rtol=0, atol=0)
    loaded = ValenceRegressor.load_from_checkpoint(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)
    assert loaded.lrs == (1e-2, 1e-4)
    x = torch.randn(4, LAYERS, DIM)
    torch.testing.assert_close(loaded(x), torch.stack([h(x) for h in module.best_heads()]), rtol=0, atol=0)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
