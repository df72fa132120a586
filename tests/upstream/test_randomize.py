"""Random-network controls redraw every weight, parametrized ones included (upstream/randomize.py)."""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch
from torch import nn

from speechbias.library_internals.transformers import init_module_weights
from speechbias.upstream.randomize import bake_parametrized_weights, init_parametrized_weights, reinitialize
from upstream.s3prl_support import perturb, save_tiny_hf_checkpoint
from upstream.tiny_models import tiny_config


class Loaded(nn.Module):
    """Every kind of weight a loaded upstream may hold, with 'trained' (perturbed) values."""

    def __init__(self):
        super().__init__()
        self.new_style = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, groups=2), dim=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            self.old_style = nn.utils.weight_norm(nn.Linear(4, 4))
        self.attention = nn.MultiheadAttention(4, 2)  # _reset_parameters only (no public reset_parameters)
        self.norm = nn.LayerNorm(4)
        self.raw = nn.Parameter(torch.ones(4))
        perturb(self)


def _effective(model: nn.Module) -> dict:
    bake_parametrized_weights(model)
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_reinitialize_leaves_no_loaded_tensor():
    loaded = _effective(Loaded())
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    model = Loaded()
    torch.random.set_rng_state(state)
    fallback = reinitialize(model, seed=0)
    assert torch.equal(torch.random.get_rng_state(), state), "the global RNG is left as it was"
    drawn = dict(model.named_parameters())
    assert drawn.keys() == loaded.keys() and "new_style.weight" in drawn and "old_style.weight" in drawn
    assert not [k for k in loaded if torch.equal(loaded[k], drawn[k])]
    assert set(fallback) == {"raw", "attention.in_proj_weight", "attention.in_proj_bias"}
    again = Loaded()
    reinitialize(again, seed=0)
    assert all(torch.equal(v, drawn[k]) for k, v in again.named_parameters())
    other = Loaded()
    reinitialize(other, seed=1)
    assert not torch.equal(dict(other.named_parameters())["new_style.weight"], drawn["new_style.weight"])


def test_a_frozen_parametrized_weight_stays_a_parameter():
    model = Loaded().requires_grad_(False)
    bake_parametrized_weights(model)
    assert "new_style.weight" in dict(model.named_parameters()) and "weight" not in dict(
        model.new_style.named_buffers()
    )
    assert not model.new_style.weight.requires_grad


def test_baking_keeps_the_values_and_leaves_plain_g_v_pairs_alone():
    """Baked weights equal what the parametrization computed; a module whose own parameters happen to be
    called ``scale_g`` / ``scale_v`` has no weight norm and stays as it is."""

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale_g, self.scale_v = nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2))

    model = Loaded()
    model.pair = Pair()
    effective = {"new_style": model.new_style.weight.detach().clone()}
    g, v = model.old_style.weight_g.detach(), model.old_style.weight_v.detach()
    effective["old_style"] = g * v / v.norm(dim=1, keepdim=True)  # weight_norm(dim=0) of a Linear, by hand
    baked = bake_parametrized_weights(model)
    assert baked == [model.new_style, model.old_style]
    torch.testing.assert_close(model.new_style.weight, effective["new_style"], rtol=0, atol=0)
    torch.testing.assert_close(model.old_style.weight, effective["old_style"])
    assert {n for n, _ in model.old_style.named_parameters()} == {"weight", "bias"}
    assert {n for n, _ in model.pair.named_parameters()} == {"scale_g", "scale_v"}


def test_transformers_init_reaches_the_weight_normed_positional_conv():
    """transformers draws wav2vec2's positional conv from N(0, 2 / sqrt(kernel * channels)); its own
    init misses the weight-normed weight (torch's Kaiming-uniform default stays: std 1/sqrt(3 * fan_in))."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(**tiny_config("wav2vec2"))
    kernel, channels = config.num_conv_pos_embeddings, config.hidden_size
    fan_in = channels // config.num_conv_pos_embedding_groups * kernel
    torch.manual_seed(0)
    plain = Wav2Vec2Model(config)
    assert plain.encoder.pos_conv_embed.conv.weight.std().item() == pytest.approx(1 / math.sqrt(3 * fan_in), rel=0.05)
    torch.manual_seed(0)
    model = Wav2Vec2Model(config)
    assert init_parametrized_weights(model, functools.partial(init_module_weights, model)) == 1
    conv = model.encoder.pos_conv_embed.conv
    assert isinstance(conv.weight, nn.Parameter)
    assert conv.weight.std().item() == pytest.approx(2 / math.sqrt(kernel * channels), rel=0.05)
    assert torch.equal(conv.bias, torch.zeros_like(conv.bias))
    # the rest is what transformers drew before (same seed, drawn first)
    after = dict(model.named_parameters())
    for name, before in plain.named_parameters():
        if "pos_conv_embed" not in name:
            assert torch.equal(before, after[name]), name


def test_hf_randomize_leaves_no_pretrained_tensor(tmp_path):
    from speechbias.upstream.hf import HFUpstream

    path = str(save_tiny_hf_checkpoint(tmp_path / "w2v2", "wav2vec2", seed=7))
    loaded = HFUpstream(model_id=path).model.state_dict()
    randomized = HFUpstream(model_id=path, randomize=True, seed=0)
    drawn = randomized.model.state_dict()
    assert drawn.keys() == loaded.keys()
    assert not [k for k, v in loaded.items() if v.is_floating_point() and torch.equal(v, drawn[k])]
    assert randomized.fingerprint_fields()["random_init"] == "transformers-init+parametrized-v1"
