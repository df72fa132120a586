"""The closed-form stacked step of several valence heads (ser/stacked_heads.py): the same estimator as
separate heads trained by autograd, each with its own Adam; independent of the heads beside it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from ser.test_training import _Crash, _fit
from speechbias.ser.datamodule import LayerMeansDataset
from speechbias.ser.head import ValenceHead
from speechbias.ser.in_memory import train_heads_in_memory
from speechbias.ser.module import adam_groups
from speechbias.ser.stacked_heads import StackedHeads

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
    """The batches of ser.in_memory (a permutation per epoch seeded by seed + epoch; short last batch)."""
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


def test_gradients_equal_autograd_of_each_heads_mse():
    torch.manual_seed(0)
    heads = [ValenceHead(LAYERS, DIM, HIDDEN) for _ in range(3)]  # three different heads
    x, y = _data()
    references = [TextbookHead(h) for h in heads]
    mse = StackedHeads(heads).set_gradients(x[:7], y[:7])
    for head, ref, value in zip(heads, references, mse):
        loss = nn.functional.mse_loss(ref(x[:7]), y[:7])
        loss.backward()
        torch.testing.assert_close(value, loss.detach(), rtol=1e-6, atol=1e-7)
        for (name, p), q in zip(head.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("step_kernel", ["torch", "compiled"])
def test_stacked_training_equals_independent_per_head_loop(step_kernel):
    """300 steps (about 100 epochs, short last batches included), then the same heads to float rounding:
    the torch step (closed-form stacked gradients + fused Adam) and the compiled one (ser/compiled_step.py)."""
    torch.manual_seed(1)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    reference = _independent_loop(init, x, y, steps=300)
    heads = train_heads_in_memory(
        [copy.deepcopy(init) for _ in LRS], LRS, x, y, max_steps=300, batch_size=32, step_kernel=step_kernel
    )
    with torch.no_grad():
        for head, ref in zip(heads, reference):
            torch.testing.assert_close(head(x), ref(x), rtol=0, atol=2e-6)
    # and the heads did move, each by its own learning rate
    assert not torch.allclose(heads[0].project.weight, heads[2].project.weight)


def test_each_head_steps_as_it_would_alone_bit_for_bit():
    torch.manual_seed(2)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    together = [copy.deepcopy(init) for _ in LRS]
    stacked, optimiser = StackedHeads(together), adam_groups([list(h.parameters()) for h in together], LRS)
    alone = [copy.deepcopy(init) for _ in LRS]
    singles = [(StackedHeads([h]), adam_groups([list(h.parameters())], [lr])) for h, lr in zip(alone, LRS)]
    for idx in _batches(40):
        stacked.set_gradients(x[idx], y[idx])
        optimiser.step()
        for one, opt in singles:
            one.set_gradients(x[idx], y[idx])
            opt.step()
    for a, b in zip(together, alone):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


def test_heads_stay_ordinary_parameters_and_are_restacked_when_replaced():
    torch.manual_seed(3)
    heads = [ValenceHead(LAYERS, DIM, HIDDEN) for _ in range(2)]
    expected = [copy.deepcopy(h) for h in heads]
    stacked = StackedHeads(heads)
    for h, e in zip(heads, expected):  # same values, now views of the stacks
        for (name, p), q in zip(h.named_parameters(), e.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    assert heads[1].project.weight.data_ptr() == stacked.values["project.weight"][1].data_ptr()
    heads[0].load_state_dict(expected[1].state_dict())  # copies in place: still bound
    assert heads[0].project.weight.data_ptr() == stacked.values["project.weight"][0].data_ptr()
    heads[1].double()  # replaces the tensors
    for h in heads:
        h.zero_grad(set_to_none=True)
    stacked.bind()
    assert stacked.values["project.weight"].dtype == torch.float64
    x, y = _data()
    stacked.set_gradients(x[:5].double(), y[:5].double())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for h in heads for p in h.parameters())


def test_lightning_run_with_the_torch_step_takes_the_stacked_step(tmp_path):
    module, trainer = _fit(tmp_path, max_steps=4, lr=list(LRS), step_kernel="torch")
    optimiser = trainer.optimizers[0]
    assert trainer.global_step == 4 and not optimiser.compiled and optimiser._stacked is not None
    assert optimiser._lists is not None  # and Adam's shortcut
    assert module.heads[2].project.weight.data_ptr() == optimiser._stacked.values["project.weight"][2].data_ptr()
    assert trainer.datamodule.gather_training_rows  # the torch step takes gathered batches


@pytest.mark.parametrize("step_kernel", ["torch", "compiled"])
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
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=name)
    for a, b in zip(full.best_heads(), resumed.best_heads()):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7, msg=name)


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


def test_adam_reusing_its_lists_steps_as_torch_adam_bit_for_bit():
    from speechbias.ser.fused_adam import ReusedListsAdam

    torch.manual_seed(4)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    runs = []
    for make in (lambda g: ReusedListsAdam(g, lr=1.0), lambda g: torch.optim.Adam(g, lr=1.0, fused=True)):
        heads = [copy.deepcopy(init) for _ in LRS]
        stacked = StackedHeads(heads)
        optimiser = make([{"params": list(h.parameters()), "lr": lr} for h, lr in zip(heads, LRS)])
        x, y = _data()
        for k, idx in enumerate(_batches(30)):
            stacked.set_gradients(x[idx], y[idx])
            optimiser.step((lambda: None) if k % 2 else None)  # Lightning passes a closure
            if k == 10:  # a checkpoint round trip in the middle
                optimiser.load_state_dict(copy.deepcopy(optimiser.state_dict()))
        runs.append(heads)
    for a, b in zip(*runs):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
