"""Temporal statistics over valid frames and temporal x layer aggregation, against plain loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hydra.core.config_store import ConfigStore

from speechbias.aggregation import LAYER_CHOICES, Aggregation, aggregate_layers, layer_index
from speechbias.features.statistics import temporal_statistics


def test_statistics_ignore_padding():
    g = torch.Generator().manual_seed(0)
    hs = [torch.randn(3, 7, 5, generator=g) for _ in range(4)]
    lengths = torch.tensor([7, 3, 1])
    out = temporal_statistics(hs, lengths)
    for b in range(3):
        for layer in range(4):
            valid = hs[layer][b, : lengths[b]].numpy()
            np.testing.assert_allclose(
                out["mean"][b, layer].numpy(), valid.astype(np.float64).mean(0), rtol=2e-7, atol=1e-7
            )  # float32 rounding of the float64 mean
            np.testing.assert_allclose(out["min"][b, layer].numpy(), valid.min(0))
            np.testing.assert_allclose(out["max"][b, layer].numpy(), valid.max(0))
    assert out["n_frames"].tolist() == [7, 3, 1]


def _ulps_off(values: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|values - exact| in units of the float32 spacing at |exact|."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(values.astype(np.float64) - exact) / spacing


@pytest.mark.parametrize("offset", [0.0, 100.0], ids=["mean near 0", "dominant offset"])
def test_temporal_mean_is_the_correctly_rounded_mean_of_long_sequences(offset):
    """1,500 frames (a 30 s clip at 50 Hz): the float32 mean stored is the exact mean (math.fsum)
    rounded once, i.e. within half a float32 ulp; a float32 running sum is not."""
    rng = np.random.default_rng(7)
    frames = (rng.standard_normal((1, 1500, 64)) + offset).astype(np.float32)
    lengths = torch.tensor([1400])
    mean = temporal_statistics([torch.from_numpy(frames)], lengths)["mean"][0, 0].numpy()
    valid = frames[0, :1400].astype(np.float64)
    exact = np.array([math.fsum(column) for column in valid.T]) / 1400
    assert mean.dtype == np.float32
    assert _ulps_off(mean, exact).max() <= 0.5 + 1e-6
    float32_sum = torch.from_numpy(frames[0, :1400]).sum(dim=0).numpy() / np.float32(1400)
    assert _ulps_off(float32_sum, exact).max() > 1.0  # measured: 2.3 ulps (offset 100), > 100 ulps (mean near 0)


def test_statistics_reject_zero_frames():
    with pytest.raises(ValueError, match="at least one valid frame"):
        temporal_statistics([torch.zeros(1, 4, 2)], torch.tensor([0]))


@pytest.mark.parametrize("num_layers", [1, 2, 13, 25, 33])
def test_layer_indices_follow_the_convention(num_layers):
    expected = {
        "first": 0,
        "second": 1,
        "q1": num_layers // 4,
        "q2": num_layers // 2,
        "q3": 3 * num_layers // 4,
        "penultimate": num_layers - 2,
        "last": num_layers - 1,
    }
    for name, idx in expected.items():
        if 0 <= idx < num_layers:
            assert layer_index(name, num_layers) == idx
        else:
            with pytest.raises(ValueError, match="does not exist"):
                layer_index(name, num_layers)


def test_reductions_match_numpy():
    x = np.random.default_rng(1).standard_normal((4, 6, 3))
    for name in ("sum", "mean", "min", "max"):
        ref = np.array([[getattr(np, name)([x[n, k, d] for k in range(6)]) for d in range(3)] for n in range(4)])
        np.testing.assert_allclose(aggregate_layers(x, name), ref)
    np.testing.assert_array_equal(Aggregation("max", "q3")(x), x[:, 4, :])


@pytest.mark.parametrize("layer", ["sum", "mean"])
def test_layer_sum_and_mean_accumulate_float32_statistics_in_float64(layer):
    """33 float32 layers: the float64 result matches math.fsum to float64 rounding; a float32 sum
    is off by about 1e-7 relative (measured up to 8e-7 for D = 1024)."""
    per_layer = np.random.default_rng(2).standard_normal((3, 33, 256)).astype(np.float32)
    out = aggregate_layers(per_layer, layer)
    exact = np.array([[math.fsum(per_layer[n, :, d].astype(np.float64)) for d in range(256)] for n in range(3)])
    if layer == "mean":
        exact /= 33
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, exact, rtol=1e-14, atol=1e-14)
    in_float32 = getattr(np, layer)(per_layer, axis=1)
    assert np.max(np.abs(in_float32 - exact)) > 1e-7 * np.max(np.abs(exact))


def test_every_strategy_returns_float64():
    per_layer = np.random.default_rng(3).standard_normal((2, 5, 4)).astype(np.float32)
    for layer in LAYER_CHOICES:
        out = aggregate_layers(per_layer, layer)
        assert out.dtype == np.float64 and out.shape == (2, 4)
    np.testing.assert_array_equal(aggregate_layers(per_layer, "max"), per_layer.max(axis=1))  # exact, only cast


def test_all_33_strategies_have_configs():
    # config group aggregation: ConfigStore nodes (speechbias.launch.aggregation_configs, registered by tests/conftest.py)
    names = {n.removesuffix(".yaml") for n in ConfigStore.instance().list("aggregation")}
    assert names == {f"{t}_{layer}" for t in ("mean", "min", "max") for layer in LAYER_CHOICES}


def test_bad_strategy_names():
    with pytest.raises(ValueError, match="temporal aggregation"):
        Aggregation("median", "sum")
    with pytest.raises(ValueError, match="layer aggregation"):
        Aggregation("mean", "middle")
