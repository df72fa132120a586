"""The s3prl adapter.

s3prl needs a torchaudio built for the installed torch; PyPI's torchaudio is a CUDA build that does
not import beside the CPU torch of CI, so ``import s3prl`` fails there. The adapter is therefore
tested in two ways: (1) against a test double of ``s3prl.nn`` injected into ``sys.modules`` that
follows s3prl's documented interface (``S3PRLUpstream(name, path_or_url, refresh, normalize,
extra_conf)``, ``num_layers``/``hidden_sizes``/``downsample_rates``, ``forward(wavs, wavs_len) ->
(all_hs, all_hs_len)`` with ``hs_len = wav_len // rate + 1``, left in train mode after __init__),
checked against states computed here per clip; (2) on the real package where it imports (weight-free
``fbank`` upstream, so no download), skipped elsewhere.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from speechbias.upstream.s3prl import S3PRLUnavailableError, S3PRLUpstream
from upstream.tiny_models import random_wavs

RATE, WIDTH = 320, 6


def fake_frames(clip: torch.Tensor) -> torch.Tensor:
    """Layer 0 of the double for one clip: per 320-sample chunk (last one partial), mean and energy
    features, hs_len = n // 320 + 1 frames, as s3prl counts them."""
    n = clip.shape[0]
    rows = []
    for t in range(n // RATE + 1):
        chunk = clip[t * RATE : (t + 1) * RATE]
        if chunk.numel() == 0:
            chunk = clip[-1:]
        m, e = chunk.mean(), (chunk**2).mean()
        rows.append(torch.stack([m, e, m * e, m - e, 2 * m, torch.tanh(e)]))
    return torch.stack(rows)


class FakeS3PRLUpstream(torch.nn.Module):
    """Test double of s3prl.nn.S3PRLUpstream: two layers, stride 320, garbage in padded frames."""

    calls: list[dict] = []

    def __init__(self, name, path_or_url=None, refresh=False, normalize=False, extra_conf=None):
        super().__init__()
        self.name = name
        self.mix = torch.nn.Linear(WIDTH, WIDTH)
        with torch.no_grad():
            self.mix.weight.copy_(torch.eye(WIDTH) + 0.1)
            self.mix.bias.fill_(0.5)
        self.train()  # real s3prl leaves the upstream in train mode after its probe forward

    num_layers = 2
    hidden_sizes = [WIDTH, WIDTH]
    downsample_rates = [RATE, RATE]

    def forward(self, wavs, wavs_len):
        FakeS3PRLUpstream.calls.append({"training": self.training, "grad": torch.is_grad_enabled()})
        lens = torch.div(wavs_len, RATE, rounding_mode="floor") + 1
        frames = int(wavs.shape[1]) // RATE + 1
        layer0 = torch.full((wavs.shape[0], frames, WIDTH), 7.0)  # padding garbage
        for row, n in enumerate(wavs_len.tolist()):
            layer0[row, : n // RATE + 1] = fake_frames(wavs[row, :n])
        layer1 = self.mix(layer0)
        return [layer0, layer1], [lens, lens.clone()]


@pytest.fixture
def fake_s3prl(monkeypatch):
    package = types.ModuleType("s3prl")
    nn_module = types.ModuleType("s3prl.nn")
    nn_module.S3PRLUpstream = FakeS3PRLUpstream
    package.nn = nn_module
    monkeypatch.setitem(sys.modules, "s3prl", package)
    monkeypatch.setitem(sys.modules, "s3prl.nn", nn_module)
    FakeS3PRLUpstream.calls = []
    return nn_module


def test_adapter_converts_s3prl_outputs_to_the_contract(fake_s3prl):
    up = S3PRLUpstream("fake_hubert")
    assert (up.num_layers, up.hidden_size, up.frame_rate, up.family) == (2, WIDTH, 50.0, "s3prl")
    assert not up.model.training, "the adapter must put the s3prl upstream in eval mode"
    lengths = [4_000, 1_000, 2_345]
    wavs, lens = random_wavs(lengths, seed=12)
    states, frame_lengths = up(wavs, lens)
    assert frame_lengths.tolist() == [n // RATE + 1 for n in lengths]
    assert all(call == {"training": False, "grad": False} for call in FakeS3PRLUpstream.calls)
    mix = up.model.mix
    for row, n in enumerate(lengths):
        t = n // RATE + 1
        expected0 = fake_frames(wavs[row, :n])
        torch.testing.assert_close(states[0][row, :t], expected0)
        torch.testing.assert_close(states[1][row, :t], expected0 @ mix.weight.T + mix.bias)
        assert torch.all(states[0][row, t:] == 0) and torch.all(states[1][row, t:] == 0)
    assert states[0].shape == (3, max(lengths) // RATE + 1, WIDTH)
    # not declared pad-invariant: one forward per distinct length, each unpadded
    assert len(FakeS3PRLUpstream.calls) == 3


def test_adapter_fingerprint_and_eval_lock(fake_s3prl):
    up = S3PRLUpstream("fake_hubert", extra_conf={"a": 1})
    up.train()
    assert not up.training and not up.model.training
    fields = up.fingerprint_fields()
    assert fields["s3prl_name"] == "fake_hubert" and fields["layer_convention"] == "s3prl-native"
    assert up.fingerprint != S3PRLUpstream("fake_wavlm").fingerprint
    assert up.fingerprint != S3PRLUpstream("fake_hubert", extra_conf={"a": 1}, randomize=True).fingerprint
    assert up.name == "s3prl:fake_hubert"


def test_adapter_randomize_reinitialises_with_the_seed(fake_s3prl):
    a = S3PRLUpstream("x", randomize=True, seed=0).model.mix.weight
    b = S3PRLUpstream("x", randomize=True, seed=0).model.mix.weight
    c = S3PRLUpstream("x", randomize=False).model.mix.weight
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_unimportable_s3prl_gives_one_actionable_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3prl", None)  # makes `import s3prl` raise ImportError
    monkeypatch.delitem(sys.modules, "s3prl.nn", raising=False)
    with pytest.raises(S3PRLUnavailableError) as caught:
        S3PRLUpstream("hubert")
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot import s3prl" in message and "speechbias[s3prl]" in message and "torchaudio" in message


def _real_s3prl_nn():
    try:
        import s3prl.nn  # noqa: F401
    except Exception as err:  # ImportError or a torchaudio/torch mismatch (OSError, RuntimeError)
        pytest.skip(f"s3prl does not import here: {type(err).__name__}")


def test_real_s3prl_weight_free_upstream():
    _real_s3prl_nn()
    up = S3PRLUpstream("fbank")
    wavs, lens = random_wavs([8_000, 4_000], seed=1)
    states, frame_lengths = up(wavs, lens)
    assert len(states) == up.num_layers
    for state in states:
        assert state.shape[0] == 2 and state.shape[2] == up.hidden_size
        assert state.shape[1] == frame_lengths.max()
    alone, alone_frames = up(wavs[1:, :4_000], lens[1:])
    assert alone_frames.item() == frame_lengths[1].item()
    t = alone_frames.item()
    for a, b in zip(alone, states):
        torch.testing.assert_close(a[0, :t], b[1, :t], atol=1e-5, rtol=1e-5)


def test_s3prl_config_instantiates_with_a_name(fake_s3prl, conf_dir):
    import hydra.utils
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(conf_dir / "upstream" / "s3prl.yaml")
    cfg.name = "fake_wavlm"
    up = hydra.utils.instantiate(cfg)
    assert isinstance(up, S3PRLUpstream) and up.upstream_name == "fake_wavlm" and not up.pad_invariant
