"""The compiled training step of the valence heads (ser/compiled_step.py through ser/heads_adam.py):
its gradients against autograd, its Adam against torch's, rows read in place against a gathered batch,
each head independent of the heads beside it, checkpoints, and the choice of kernel."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch import nn

from ser.test_training_step import DIM, HIDDEN, LAYERS, LRS, TextbookHead, _batches, _data
from speechbias.ser import heads_adam
from speechbias.ser.head import ValenceHead, predict_with_heads
from speechbias.ser.module import adam_groups, per_head_mse
from speechbias.ser.heads_adam import HeadsAdam, compiled_step_available

BETA1, BETA2 = 0.9, 0.999


def _step(optimiser, x, y, idx):
    return optimiser.step(batch={"source": x, "index": idx, "target": y[idx]})


def test_first_step_moments_hold_each_heads_autograd_gradient():
    """After one step from a fresh state Adam's moments are (1 - beta1) g and (1 - beta2) g^2: they expose
    the gradient the compiled pass made (W1's never exists as a tensor) to compare with autograd's."""
    torch.manual_seed(0)
    heads = [ValenceHead(LAYERS, DIM, HIDDEN) for _ in LRS]  # three different heads
    references = [TextbookHead(h) for h in heads]
    x, y = _data()
    idx = torch.arange(3, 40)
    optimiser = HeadsAdam(heads, LRS)
    mse = _step(optimiser, x, y, idx)
    assert optimiser._arrays is not None  # the compiled pass ran
    for head, ref, value in zip(heads, references, mse):
        loss = nn.functional.mse_loss(ref(x[idx]), y[idx])
        loss.backward()
        assert float(value) == pytest.approx(float(loss.detach()), rel=1e-5)
        for (name, p), q in zip(head.named_parameters(), ref.parameters()):
            state = optimiser.state[p]
            assert float(state["step"]) == 1.0
            torch.testing.assert_close(state["exp_avg"] / (1 - BETA1), q.grad, rtol=2e-4, atol=1e-7, msg=name)
            torch.testing.assert_close(state["exp_avg_sq"] / (1 - BETA2), q.grad**2, rtol=5e-4, atol=1e-12, msg=name)


def test_each_head_steps_as_it_would_alone_bit_for_bit():
    torch.manual_seed(2)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    together = [copy.deepcopy(init) for _ in LRS]
    optimiser = HeadsAdam(together, LRS)
    alone = [copy.deepcopy(init) for _ in LRS]
    singles = [HeadsAdam([h], [lr]) for h, lr in zip(alone, LRS)]
    for idx in _batches(40):
        _step(optimiser, x, y, idx)
        for single in singles:
            _step(single, x, y, idx)
    for a, b in zip(together, alone):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    assert not torch.equal(together[0].project.weight, init.project.weight)


def test_rows_read_in_place_equal_a_gathered_batch_bit_for_bit():
    torch.manual_seed(3)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    in_place, gathered = ([copy.deepcopy(init) for _ in LRS] for _ in range(2))
    opt_a, opt_b = HeadsAdam(in_place, LRS), HeadsAdam(gathered, LRS)
    for idx in _batches(25, batch_size=16):
        mse_a = _step(opt_a, x, y, idx)
        mse_b = opt_b.step(batch={"features": x[idx].clone(), "target": y[idx]})
        torch.testing.assert_close(mse_a, mse_b, rtol=0, atol=0)
    for a, b in zip(in_place, gathered):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)


def test_compiled_and_general_steps_agree_to_float_rounding():
    torch.manual_seed(4)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    compiled, general = ([copy.deepcopy(init) for _ in LRS] for _ in range(2))
    opt_c = HeadsAdam(compiled, LRS)
    opt_g = adam_groups([list(h.parameters()) for h in general], LRS)
    for idx in _batches(60):
        mse = per_head_mse(predict_with_heads(general, x[idx]), y[idx])
        opt_g.zero_grad(set_to_none=True)
        mse.sum().backward()
        opt_g.step()
        torch.testing.assert_close(_step(opt_c, x, y, idx).float(), mse.detach(), rtol=1e-5, atol=1e-7)
    with torch.no_grad():
        for a, b in zip(compiled, general):
            torch.testing.assert_close(a(x), b(x), rtol=0, atol=2e-6)


def test_checkpoint_round_trip_continues_bit_for_bit_and_keeps_adams_format():
    torch.manual_seed(5)
    init = ValenceHead(LAYERS, DIM, HIDDEN)
    x, y = _data()
    batches = list(_batches(20))
    straight = [copy.deepcopy(init) for _ in LRS]
    opt = HeadsAdam(straight, LRS)
    for idx in batches:
        _step(opt, x, y, idx)
    first = [copy.deepcopy(init) for _ in LRS]
    opt_first = HeadsAdam(first, LRS)
    for idx in batches[:10]:
        _step(opt_first, x, y, idx)
    saved = copy.deepcopy(opt_first.state_dict())
    # Adam's own format: a state per parameter with its step count and moments of its shape
    params = [p for h in first for p in h.parameters()]
    assert len(saved["state"]) == len(params)
    for i, p in enumerate(params):
        assert set(saved["state"][i]) == {"step", "exp_avg", "exp_avg_sq"} and float(saved["state"][i]["step"]) == 10
        assert saved["state"][i]["exp_avg"].shape == p.shape
    resumed = [copy.deepcopy(h) for h in first]
    opt_resumed = HeadsAdam(resumed, LRS)
    opt_resumed.load_state_dict(saved)
    for idx in batches[10:]:
        _step(opt_resumed, x, y, idx)
    for a, b in zip(straight, resumed):
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    # and torch's Adam takes the state
    plain = [copy.deepcopy(h) for h in first]
    torch_adam = torch.optim.Adam([{"params": list(h.parameters()), "lr": lr} for h, lr in zip(plain, LRS)], lr=LRS[0])
    torch_adam.load_state_dict(saved)
    assert float(torch_adam.state[next(plain[0].parameters())]["step"]) == 10


def test_choice_of_kernel_and_a_missing_numba(monkeypatch, caplog):
    assert compiled_step_available("auto") and compiled_step_available("compiled")
    assert not compiled_step_available("torch")
    with pytest.raises(ValueError, match="step_kernel"):
        compiled_step_available("fast")
    monkeypatch.setattr(heads_adam, "_compiled_missing", "ImportError: No module named 'numba'")
    monkeypatch.setattr(heads_adam, "_missing_warned", False)
    with caplog.at_level(logging.WARNING):
        assert not compiled_step_available("auto")
    assert "compiled SER step is unavailable" in caplog.text
    with pytest.raises(RuntimeError, match="unavailable"):
        compiled_step_available("compiled")


def test_float64_parameters_or_features_do_not_take_the_compiled_step():
    torch.manual_seed(7)
    x, y = _data()
    optimiser = HeadsAdam([ValenceHead(LAYERS, DIM, HIDDEN).double() for _ in LRS], LRS)
    assert not optimiser.takes_batch({"features": x[:8], "target": y[:8]})
    with pytest.raises(ValueError, match="does not apply"):
        optimiser.step(batch={"features": x[:8], "target": y[:8]})
    optimiser = HeadsAdam([ValenceHead(LAYERS, DIM, HIDDEN) for _ in LRS], LRS)
    assert not optimiser.takes_batch({"features": x[:8].double(), "target": y[:8].double()})
    assert optimiser.takes_batch({"features": x[:8], "target": y[:8]})


def test_lightning_run_takes_the_compiled_step_reading_rows_in_place(tmp_path):
    from ser.test_training import _fit

    module, trainer = _fit(tmp_path, max_steps=5, lr=list(LRS), steps_per_call=2)
    optimiser = trainer.optimizers[0]
    assert trainer.global_step == 5 and isinstance(optimiser, HeadsAdam)
    assert optimiser._arrays is not None and not trainer.datamodule.gather_training_rows
    with pytest.raises(ValueError, match="step_kernel"):
        _fit(tmp_path / "bad", max_steps=1, step_kernel="fast")


def test_the_config_check_knows_the_same_step_kernels():
    from speechbias.ser.training_settings import HeadSettings
    from speechbias.checked_settings import settings_keys

    assert settings_keys(HeadSettings)["downstream.step_kernel"].choices == heads_adam.STEP_KERNELS
