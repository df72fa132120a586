"""The one training step of the valence heads (autograd + torch.optim.Adam, through the LightningModule)
and its CPU fast path (the compiled step): both are the estimator of separate heads trained by autograd
from the head's formula, each with its own Adam; a head's numbers do not depend on the heads beside it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from ser.test_training import _Crash, _fit
from speechbias.ser.datamodule import LayerMeansDataModule, LayerMeansDataset
from speechbias.ser.fit import fit_trainer, fit_valence_head
from speechbias.ser.head import ValenceHead, predict_with_heads
from speechbias.ser.heads_adam import HeadsAdam
from speechbias.ser.module import ValenceRegressor, per_head_mse

N, LAYERS, DIM, HIDDEN = 100, 4, 12, 8
LRS = (1e-2, 1e-3, 1e-4)


class TextbookHead(nn.Module):
    """The head written from its formula, for reference: softmax layer weights -> weighted sum of the
    layers -> Linear(D, H) -> Linear(H, 1)."""

    def __init__(self, head: ValenceHead):
        super().__init__()
        self.layer_logits = nn.Parameter(head.layer_logits.detach().clone())
        self.project = copy.deepcopy(head.project)
        self.output = copy.deepcopy(head.output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = (torch.softmax(self.layer_logits, 0)[None, :, None] * x).sum(1)
        return self.output(self.project(mixed)).squeeze(-1)


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, LAYERS, DIM, generator=g)
    y = (0.5 + 0.2 * x[:, 1, 0]).clamp(0, 1)
    return x, y


def _batches(steps: int, batch_size: int = 32, seed: int = 0):
    """The training batches of LayerMeansDataModule over N rows: a permutation per epoch seeded by
    seed + epoch, cut into batches (the last one short), written out here from its documentation."""
    step, epoch = 0, 0
    while True:
        order = torch.randperm(N, generator=torch.Generator().manual_seed(seed + epoch))
        for start in range(0, N, batch_size):
            yield order[start : start + batch_size]
            step += 1
            if step >= steps:
                return
        epoch += 1


def _independent_loop(init: ValenceHead, x, y, steps: int) -> list[TextbookHead]:
    """One module and one torch.optim.Adam per learning rate, MSE, autograd: the paper's estimator."""
    heads = [TextbookHead(init) for _ in LRS]
    optimisers = [torch.optim.Adam(h.parameters(), lr=lr) for h, lr in zip(heads, LRS)]
    for idx in _batches(steps):
        for head, opt in zip(heads, optimisers):
            loss = nn.functional.mse_loss(head(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return heads


def _lightning_train(tmp_path, init: ValenceHead, x, y, steps: int, step_kernel: str) -> ValenceRegressor:
    """The heads of LRS trained by the LightningModule (as train.py trains them) on the N rows of x,
    with 10 extra dev rows."""
    dev_rows = torch.randn(10, LAYERS, DIM, generator=torch.Generator().manual_seed(99))
    features = torch.cat([x, dev_rows]).numpy()
    target = torch.cat([y, torch.full((10,), 0.5)]).numpy()
    dev = np.arange(N + 10) >= N
    module = ValenceRegressor(LAYERS, DIM, HIDDEN, lr=list(LRS), valence_range=(0, 1), step_kernel=step_kernel)
    for head in module.heads:
        head.load_state_dict(init.state_dict())

    def make(**kw):
        return pl.Trainer(
            accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False, **kw
        )

    trainer = fit_trainer(make, tmp_path / "checkpoints", max_steps=steps, val_every_n_epochs=10)
    dm = LayerMeansDataModule(features, target, dev, batch_size=32, seed=0, steps_per_call=8)
    fit_valence_head(trainer, module, dm, tmp_path / "checkpoints")
    return module


def test_general_step_gradients_equal_autograd_of_each_heads_formula():
    torch.manual_seed(0)
    heads = [ValenceHead(LAYERS, DIM, HIDDEN) for _ in range(3)]  # three different heads
    x, y = _data()
    references = [TextbookHead(h) for h in heads]
    mse = per_head_mse(predict_with_heads(heads, x[:7]), y[:7])
    mse.sum().backward()
    for head, ref, value in zip(heads, references, mse):
        loss = nn.functional.mse_loss(ref(x[:7]), y[:7])
        loss.backward()
        torch.testing.assert_close(value, loss, rtol=1e-6, atol=1e-7)
        for (name, p), q in zip(head.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("step_kernel", ["torch", "auto"])
def test_lightning_training_equals_independent_per_head_loop(tmp_path, step_kernel):
    """300 steps (75 epochs, short last batches included), then the same heads to float rounding: the
    general step (torch) and the CPU fast path (auto: the compiled step)."""
    torch.manual_seed(1)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    reference = _independent_loop(init, x, y, steps=300)
    module = _lightning_train(tmp_path, init, x, y, steps=300, step_kernel=step_kernel)
    assert isinstance(module.trainer.optimizers[0], HeadsAdam) == (step_kernel == "auto")
    with torch.no_grad():
        for head, ref in zip(module.heads, reference):
            torch.testing.assert_close(head(x), ref(x), rtol=0, atol=2e-6)
    # and the heads did move, each by its own learning rate
    assert not torch.allclose(module.heads[0].project.weight, module.heads[2].project.weight)


def test_lightning_run_with_the_torch_kernel_takes_the_general_step(tmp_path):
    _, trainer = _fit(tmp_path, max_steps=4, lr=list(LRS), step_kernel="torch")
    optimiser = trainer.optimizers[0]
    assert trainer.global_step == 4 and type(optimiser) is torch.optim.Adam
    assert [g["lr"] for g in optimiser.param_groups] == list(LRS)
    assert trainer.datamodule.gather_training_rows  # the general step takes gathered batches


@pytest.mark.parametrize("step_kernel", ["torch", "auto"])
def test_resumed_run_ends_with_the_heads_of_the_uninterrupted_run(tmp_path, step_kernel):
    """4 steps an epoch, 3 per Lightning call, last.ckpt every 2 epochs (step 8); killed after step 11 of 12."""
    kw = dict(
        max_steps=12,
        lr=list(LRS),
        steps_per_call=3,
        checkpoint_every_n_epochs=2,
        batch_size=16,
        step_kernel=step_kernel,
    )
    full, _ = _fit(tmp_path / "full", **kw)
    with pytest.raises(RuntimeError):
        _fit(tmp_path / "cut", callbacks=[_Crash(11)], **kw)
    resumed, trainer = _fit(tmp_path / "cut", seed=123, **kw)  # another init: the checkpoint wins
    assert trainer.global_step == 12
    for a, b in zip(full.heads, resumed.heads):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    for a, b in zip(full.best_heads(), resumed.best_heads()):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


def test_consecutive_rows_are_served_as_a_view_with_the_same_values():
    x, y = _data()
    data = LayerMeansDataset(x, y)
    whole = data.__getitems__(list(range(10, 40)))
    assert whole["features"].data_ptr() == x[10].data_ptr()
    torch.testing.assert_close(whole["features"], x[10:40], rtol=0, atol=0)
    picked = data.__getitems__([3, 4, 9])
    torch.testing.assert_close(picked["features"], x[[3, 4, 9]], rtol=0, atol=0)
    torch.testing.assert_close(picked["target"], y[[3, 4, 9]], rtol=0, atol=0)
    np.testing.assert_array_equal(whole["index"].numpy(), np.arange(10, 40))


def test_mixed_precision_takes_the_general_step_and_the_compiled_kernel_refuses_it(tmp_path):
    features, target = (t.numpy() for t in _data())
    dev = np.arange(N) >= 80

    def fit(step_kernel: str) -> tuple[ValenceRegressor, pl.Trainer]:
        module = ValenceRegressor(LAYERS, DIM, HIDDEN, lr=list(LRS), valence_range=(0, 1), step_kernel=step_kernel)
        initial = copy.deepcopy(module.heads)

        def make(**kw):
            return pl.Trainer(
                accelerator="cpu",
                devices=1,
                precision="bf16-mixed",
                logger=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                **kw,
            )

        trainer = fit_trainer(make, tmp_path / step_kernel, max_steps=6)
        dm = LayerMeansDataModule(features, target, dev, batch_size=16, steps_per_call=4)
        fit_valence_head(trainer, module, dm, tmp_path / step_kernel)
        for head, start in zip(module.heads, initial):
            assert not torch.equal(head.project.weight, start.project.weight)
        return module, trainer

    _, trainer = fit("auto")
    assert trainer.global_step == 6 and type(trainer.optimizers[0]) is torch.optim.Adam
    with pytest.raises(ValueError, match="step_kernel=compiled needs one process at 32-bit precision"):
        fit("compiled")
