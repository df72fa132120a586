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
    return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, **kw)


def _fit(tmp, max_steps=6, seed=0, callbacks=(), data_seed=0):
    features, target, dev, _ = _data()
    pl.seed_everything(seed, verbose=False)
    module = ValenceRegressor(LAYERS, DIM, hidden_size=16, lr=1e-2, valence_range=(LOW, HIGH))
    trainer = fit_trainer(_make_trainer, tmp / "checkpoints", max_steps=max_steps, val_every_n_epochs=1,
                          callbacks=list(callbacks))
    dm = LayerMeansDataModule(features, target, dev, batch_size=32, seed=data_seed)
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
    pred01 = np.array([W2 @ (W1 @ np.tensordot(w, features[i].astype(float), axes=1) + b1) + b2
                       for i in np.flatnonzero(dev)])[:, 0]
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
