"""Several learning rates in one Lightning run: each head ends where its own run would."""

from __future__ import annotations

import pytest
import torch

from ser.test_training import _Crash, _fit
from speechbias.ser.module import ValenceRegressor, metric_key
from speechbias.ser.training_settings import learning_rates
from speechbias.ser.pooling import lr_label

LRS = [1e-2, 1e-3, 1e-4]


@pytest.mark.parametrize("step_kernel", ["torch", "auto"])  # the general step and the CPU fast path
def test_three_heads_in_one_run_equal_three_single_rate_runs(tmp_path, step_kernel):
    together, trainer = _fit(tmp_path / "together", max_steps=8, lr=LRS, step_kernel=step_kernel)
    assert trainer.global_step == 8 and len(together.heads) == 3
    for k, lr in enumerate(LRS):
        alone, _ = _fit(tmp_path / f"alone{k}", max_steps=8, lr=lr, step_kernel=step_kernel)
        for (name, a), b in zip(together.heads[k].state_dict().items(), alone.head.state_dict().values()):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"lr={lr} {name}")  # bit for bit
        mine = [h for h in together.dev_history if h["lr"] == lr]
        assert [h["step"] for h in mine] == [h["step"] for h in alone.dev_history] == [2, 4, 6, 8]
        assert [h["mse"] for h in mine] == [h["mse"] for h in alone.dev_history]
        best, ref = together.best[k], alone.best[0]
        assert best["step"] == ref["step"] and best["mse"] == ref["mse"]
        assert best["mse"] == min(h["mse"] for h in mine)
    # the heads really trained differently
    assert not torch.allclose(together.heads[0].project.weight, together.heads[2].project.weight)


def test_best_heads_hold_the_weights_of_the_lowest_dev_mse(tmp_path):
    module, _ = _fit(tmp_path, max_steps=8, lr=LRS)
    for k, head in enumerate(module.best_heads()):
        best = module.best[k]
        for name, value in head.state_dict().items():
            torch.testing.assert_close(value, best["state"][name], rtol=0, atol=0)
        if best["step"] != 8:  # an earlier validation was best: the copy differs from the final head
            assert not torch.equal(head.project.weight, module.heads[k].project.weight.detach())


def test_interrupted_several_head_run_resumes_with_its_best_heads(tmp_path):
    full, _ = _fit(tmp_path / "full", max_steps=8, lr=LRS)
    with pytest.raises(RuntimeError, match="simulated interruption"):
        _fit(tmp_path / "cut", max_steps=8, lr=LRS, callbacks=[_Crash(5)])
    resumed, trainer = _fit(tmp_path / "cut", max_steps=8, lr=LRS, seed=123)
    assert trainer.global_step == 8
    for a, b in zip(full.best, resumed.best):
        assert (a["step"], a["epoch"]) == (b["step"], b["epoch"])
        assert a["mse"] == pytest.approx(b["mse"], rel=1e-6)
        for name in a["state"]:
            torch.testing.assert_close(a["state"][name], b["state"][name], rtol=1e-6, atol=1e-7)
    assert len(resumed.dev_history) == 3 * 4


def test_learning_rate_lists_are_checked_and_labelled():
    assert learning_rates(1e-4) == (1e-4,)
    assert learning_rates([1e-3, "1e-4"]) == (1e-3, 1e-4)
    for bad in ([1e-3, 1e-3], [1e-3, -1.0], [], ["fast"]):
        with pytest.raises(ValueError, match="distinct such numbers"):  # a ConfigError naming lr
            learning_rates(bad)
    with pytest.raises(ValueError, match="lr="):
        ValenceRegressor(3, 4, lr=[1e-3, 1e-3])
    assert [lr_label(v) for v in (1e-3, 1e-4, 1e-5, 3e-4, 0.5)] == ["1e-3", "1e-4", "1e-5", "3e-4", "5e-1"]
    assert metric_key("ser/val/r2", 1e-3, 1) == "ser/val/r2"
    assert metric_key("ser/val/r2", 1e-3, 3) == "ser/val/r2/lr=1e-3"
    module = ValenceRegressor(3, 4, lr=LRS)
    with pytest.raises(ValueError, match="3 heads"):
        _ = module.head
    assert [g["lr"] for g in module.configure_optimizers().param_groups] == LRS
    for h in module.heads[1:]:  # same initial weights, as separate runs with one seed
        torch.testing.assert_close(h.project.weight, module.heads[0].project.weight, rtol=0, atol=0)
