"""The library internals speechbias uses (speechbias.library_internals): each works on the checked
versions and says so clearly outside them."""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from torch import nn

from speechbias.library_internals import torch as torch_internals
from speechbias.library_internals import transformers as transformers_internals
from speechbias.library_internals.version_bound import bound_text, release, within
from speechbias.upstream.randomize import bake_parametrized_weights


def test_release_and_bounds():
    assert release("2.13.0+cpu") == (2, 13) and release("5.25.0") == (5, 25) and release("6.0.0.dev0") == (6, 0)
    assert within("2.4.1", (2, 4), (2, 15)) and within("2.14.9", (2, 4), (2, 15))
    assert not within("2.15.0", (2, 4), (2, 15)) and not within("2.3.9", (2, 4), (2, 15))
    assert bound_text((2, 4), (2, 15)) == ">=2.4,<2.15"
    with pytest.raises(ValueError, match="version number"):
        release("main")


def test_the_checked_ranges_contain_the_installed_versions():
    assert within(torch.__version__, *torch_internals.CHECKED)
    assert within(transformers.__version__, *transformers_internals.CHECKED)


def _baked_weight_normed_conv() -> nn.Module:
    model = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3), dim=2))
    bake_parametrized_weights(model)
    return model


def test_a_baked_weight_normed_module_pickles_once_its_hook_is_dropped():
    model = _baked_weight_normed_conv()
    with pytest.raises((pickle.PicklingError, AttributeError)):  # weight norm's local key-renaming hook
        pickle.dumps(model)
    assert torch_internals.drop_weight_norm_compat_hooks(model) == 1
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(pickle.loads(pickle.dumps(model))(x), model(x), rtol=0, atol=0)
    assert torch_internals.drop_weight_norm_compat_hooks(model) == 0


def test_outside_the_torch_range_the_hooks_stay_with_a_warning(monkeypatch):
    model = _baked_weight_normed_conv()
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    with pytest.warns(UserWarning, match=r"torch 2\.15\.0 is outside >=2\.4,<2\.15"):
        assert torch_internals.drop_weight_norm_compat_hooks(model) == 0


def test_outside_the_transformers_range_the_module_init_is_a_clear_error(monkeypatch):
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    from upstream.tiny_models import tiny_config

    model = Wav2Vec2Model(Wav2Vec2Config(**tiny_config("wav2vec2")))
    init = functools.partial(transformers_internals.init_module_weights, model)
    init(model.encoder.pos_conv_embed)
    monkeypatch.setattr(transformers, "__version__", "6.0.0")
    with pytest.raises(RuntimeError, match=r"transformers 6\.0\.0 is outside >=5\.0,<6\.0"):
        init(model.encoder.pos_conv_embed)


def test_upstream_uses_no_private_api_outside_library_internals():
    """benchmarks/private_api_uses.py (run as a user runs it) finds none in upstream/ or anywhere else
    outside library_internals/, and the internals upstream/ needs inside it."""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "benchmarks/private_api_uses.py", "--worktree"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert not [line for line in out if line.startswith("src/speechbias/upstream/")]
    # and none anywhere else in src/: every remaining internal is named in library_internals/
    assert [line for line in out[:-1] if not line.startswith("src/speechbias/library_internals/")] == []
    internals = [line for line in out if line.startswith("src/speechbias/library_internals/")]
    assert any("_load_state_dict_pre_hooks" in line for line in internals)
    assert any("_init_weights" in line for line in internals)
    assert out[-1].startswith(f"{len(out) - 1} private-API uses in src/ at the work tree")
