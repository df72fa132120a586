"""Temporal statistics over valid frames and temporal x layer aggregation, against plain loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

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
            np.testing.assert_allclose(out["mean"][b, layer].numpy(), valid.mean(0), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["min"][b, layer].numpy(), valid.min(0))
            np.testing.assert_allclose(out["max"][b, layer].numpy(), valid.max(0))
    assert out["n_frames"].tolist() == [7, 3, 1]


def test_statistics_reject_zero_frames():
    with pytest.raises(ValueError, match="at least one valid frame"):
        temporal_statistics([torch.zeros(1, 4, 2)], torch.tensor([0]))


@pytest.mark.parametrize("num_layers", [1, 2, 13, 25, 33])
def test_layer_indices_follow_the_convention(num_layers):
    expected = {"first": 0, "second": 1, "q1": num_layers // 4, "q2": num_layers // 2, "q3": 3 * num_layers // 4,
                "penultimate": num_layers - 2, "last": num_layers - 1}
    for name, idx in expected.items():
        if 0 <= idx < num_layers:
            assert layer_index(name, num_layers) == idx
        else:
            with pytest.raises(ValueError, match="does not exist"):
                layer_index(name, num_layers)


def test_reductions_match_numpy():
    x = np.random.default_rng(1).standard_normal((4, 6, 3))
    for name in ("sum", "mean", "min", "max"):
        ref = np.array([[getattr(np, name)([x[n, l, d] for l in range(6)]) for d in range(3)] for n in range(4)])
        np.testing.assert_allclose(aggregate_layers(x, name), ref)
    np.testing.assert_array_equal(Aggregation("max", "q3")(x), x[:, 4, :])


def test_all_33_strategies_have_configs(conf_dir):
    names = {p.stem for p in (conf_dir / "aggregation").glob("*.yaml")}
    assert names == {f"{t}_{l}" for t in ("mean", "min", "max") for l in LAYER_CHOICES}


def test_bad_strategy_names():
    with pytest.raises(ValueError, match="temporal aggregation"):
        Aggregation("median", "sum")
    with pytest.raises(ValueError, match="layer aggregation"):
        Aggregation("mean", "middle")
