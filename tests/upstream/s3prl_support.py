"""A test double of s3prl (for environments without the extra) and tiny local transformers checkpoints.

The double has two parts, each a copy of what s3prl 0.4.18 does where it can be compared:

* :class:`FakeExpert`, an s3prl *upstream expert* (the module ``s3prl.hub.<name>(...)`` returns:
  ``forward(list of 1-D wavs) -> {"hidden_states": [...]}``, ``get_downsample_rates``) with a
  wav2vec2-like frame count: ``(n - 400) // stride + 1`` frames, frames past a shorter clip's end
  computed from its zero padding. It holds a weight-normed Linear and a raw ``nn.Parameter`` (what
  ``reset_parameters`` alone misses). It runs inside the real s3prl too (``test_s3prl.py`` registers
  it as an s3prl hub entry).
* :class:`FakeS3PRLUpstream`, ``s3prl.nn.S3PRLUpstream``'s constructor and ``forward`` as s3prl
  0.4.18 writes them: a probe forward, then left in train mode; ``forward`` stretches each layer to
  ``len(range(0, n, rate))`` frames by repeating the last frame and reports
  ``hs_len = (n - 1) // rate + 1``. ``test_s3prl.py`` checks it against the real class where s3prl
  imports.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import torch
from torch import nn

RATE, WINDOW, WIDTH = 320, 400, 6


def fake_frames(clip: torch.Tensor, stride: int = RATE) -> torch.Tensor:
    """Layer 0 of :class:`FakeExpert` for one unpadded clip: per 400-sample window every ``stride``
    samples, six features of the window's mean m and energy e; ``(n - 400) // stride + 1`` frames."""
    rows = []
    for t in range((clip.shape[0] - WINDOW) // stride + 1):
        chunk = clip[t * stride : t * stride + WINDOW]
        m, e = chunk.mean(), (chunk**2).mean()
        rows.append(torch.stack([m, e, m * e, m - e, 2 * m, torch.tanh(e)]))
    return torch.stack(rows)


class FakeExpert(nn.Module):
    """An s3prl upstream expert: two layers of WIDTH, declared stride RATE (real stride ``stride``)."""

    def __init__(self, stride: int = RATE, **conf):
        super().__init__()
        self.stride = stride
        self.conf = conf
        self.mix = nn.utils.parametrizations.weight_norm(nn.Linear(WIDTH, WIDTH))
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, WIDTH))
        with torch.no_grad():
            self.mix.parametrizations.weight.original1.copy_(torch.eye(WIDTH) + 0.1)
            self.mix.parametrizations.weight.original0.fill_(1.3)
            self.mix.bias.fill_(0.5)

    def get_downsample_rates(self, key: str | None = None) -> int:
        return RATE

    def layer1(self, layer0: torch.Tensor) -> torch.Tensor:
        return self.mix(layer0) * self.scale

    def forward(self, wavs: list[torch.Tensor]) -> dict:
        longest = max(int(w.shape[0]) for w in wavs)
        padded = torch.stack([torch.nn.functional.pad(w, (0, longest - w.shape[0])) for w in wavs])
        layer0 = torch.stack([fake_frames(row, self.stride) for row in padded])
        return {"hidden_states": [layer0, self.layer1(layer0)]}


#: name -> expert factory of the double's hub
FAKE_HUB = {
    "fake_hubert": lambda **conf: FakeExpert(**conf),
    "fake_wavlm": lambda **conf: FakeExpert(**conf),
    "fake_stride10": lambda **conf: FakeExpert(stride=10, **conf),
}


class FakeS3PRLUpstream(nn.Module):
    """``s3prl.nn.S3PRLUpstream`` of s3prl 0.4.18 (constructor and forward) over :data:`FAKE_HUB`."""

    calls: list[dict] = []

    @classmethod
    def available_names(cls, only_registered_ckpt: bool = False) -> list[str]:
        return sorted(FAKE_HUB)

    def __init__(self, name, path_or_url=None, refresh=False, normalize=False, extra_conf=None, randomize=False):
        super().__init__()
        conf = {"refresh": refresh, **(extra_conf or {})}
        if path_or_url is not None:
            conf["ckpt"] = path_or_url
        self.upstream = FAKE_HUB[name](**conf)
        self.normalize = normalize
        self.upstream.eval()
        with torch.no_grad():
            hs = self.upstream([torch.randn(16_000), torch.randn(24_000)])["hidden_states"]
        self.upstream.train()  # as s3prl does after its probe
        self.num_layers = len(hs)
        self.hidden_sizes = [h.size(-1) for h in hs]
        self.downsample_rates = [self.upstream.get_downsample_rates("hidden_states")] * self.num_layers

    @staticmethod
    def _match_length(xs: torch.Tensor, target_max_len: int) -> torch.Tensor:
        if xs.size(1) > target_max_len:
            assert xs.size(1) // target_max_len == 1, f"{xs.size(1)}, {target_max_len}"
            return xs[:, :target_max_len, :]
        if xs.size(1) < target_max_len:
            assert target_max_len // xs.size(1) == 1, f"{target_max_len}, {xs.size(1)}"
            return torch.cat((xs, xs[:, -1:, :].repeat(1, target_max_len - xs.size(1), 1)), dim=1)
        return xs

    def forward(self, wavs: torch.Tensor, wavs_len: torch.Tensor):
        FakeS3PRLUpstream.calls.append({"training": self.training, "grad": torch.is_grad_enabled()})
        if max(wavs_len) < 800:  # s3prl's MIN_SECOND * SAMPLE_RATE
            pad = 800 - int(max(wavs_len))
            wavs = torch.cat((wavs, wavs.new_zeros(wavs.size(0), pad)), dim=1)
            original_len, wavs_len = wavs_len, wavs_len + pad
        else:
            original_len = wavs_len
        hidden_states = self.upstream([wav[:n] for wav, n in zip(wavs, wavs_len)])["hidden_states"]
        max_len = int(max(wavs_len))
        all_hs, all_lens = [], []
        for h, stride in zip(hidden_states, self.downsample_rates):
            h = self._match_length(h, len(range(0, max_len, stride)))
            h_len = torch.div(original_len - 1, stride, rounding_mode="floor") + 1
            all_hs.append(h[:, : max(h_len), :])
            all_lens.append(h_len)
        return all_hs, all_lens


def install_fake_s3prl(monkeypatch) -> types.ModuleType:
    """Put the double in ``sys.modules`` as ``s3prl`` / ``s3prl.nn`` (undone by ``monkeypatch``)."""
    package = types.ModuleType("s3prl")
    nn_module = types.ModuleType("s3prl.nn")
    nn_module.S3PRLUpstream = FakeS3PRLUpstream
    package.nn = nn_module
    monkeypatch.setitem(sys.modules, "s3prl", package)
    monkeypatch.setitem(sys.modules, "s3prl.nn", nn_module)
    FakeS3PRLUpstream.calls = []
    return nn_module


def perturb(module: nn.Module, seed: int = 3) -> None:
    """Add noise to every parameter, so that no tensor keeps a value an initialiser would give
    (LayerNorm ones and zeros included): a stand-in for trained weights."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=gen))


def save_tiny_hf_checkpoint(
    folder: str | Path, family: str = "wav2vec2", seed: int = 0, conv_stride: list[int] | None = None
) -> Path:
    """A tiny post-LN wav2vec2/HuBERT with perturbed weights and its feature extractor config in ``folder``
    (``save_pretrained``), loadable by transformers, by ``upstream=hf model_id=<folder>`` and by s3prl's
    ``hf_wav2vec2_custom`` / ``hf_hubert_custom``. ``conv_stride``: another conv stack (frame rate)."""
    from transformers import HubertConfig, HubertModel, Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

    from upstream.tiny_models import tiny_config

    config = tiny_config(family, stable=False)
    if conv_stride is not None:
        config["conv_stride"] = list(conv_stride)
    config_cls, model_cls = {"wav2vec2": (Wav2Vec2Config, Wav2Vec2Model), "hubert": (HubertConfig, HubertModel)}[family]
    torch.manual_seed(seed)
    model = model_cls(config_cls(**config))
    perturb(model, seed=seed + 3)
    folder = Path(folder)
    model.save_pretrained(folder)
    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16_000, padding_value=0.0, do_normalize=True, return_attention_mask=False
    ).save_pretrained(folder)
    return folder


if __name__ == "__main__":  # python tests/upstream/s3prl_support.py <folder> <wav2vec2|hubert> [stride ...]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    strides = [int(s) for s in sys.argv[3:]] or None
    print(save_tiny_hf_checkpoint(sys.argv[1], sys.argv[2], conv_stride=strides))
