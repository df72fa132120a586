"""Any s3prl upstream (``s3prl.nn.S3PRLUpstream(name)``) behind the Upstream contract.

s3prl is an optional extra and is imported only when this class is built. Layers are s3prl's own
(``layer_convention = "s3prl-native"``: whatever list the s3prl upstream returns as hidden_states),
and valid frames are s3prl's ``hs_len``. s3prl pads clips itself, so by default the adapter assumes
nothing about padding (``pad_invariant=False``) and runs a mixed-length batch one length at a time.
"""

from __future__ import annotations

import importlib
import importlib.metadata

import torch

from speechbias.audio import SAMPLE_RATE
from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import forward_batch_invariant

INSTALL_HINT = (
    "install the optional extra beside a torchaudio built for the same torch version and device, e.g. "
    "`pip install 'speechbias[s3prl]' torch==X.Y.Z torchaudio==X.Y.Z` from one index (both CPU or both the same CUDA); "
    "PyPI's default torchaudio is a CUDA build that does not import beside a CPU-only torch"
)


class S3PRLUnavailableError(ImportError):
    """s3prl (or the torchaudio it needs) does not import in this environment."""


def import_s3prl_nn():
    """The ``s3prl.nn`` module, or S3PRLUnavailableError with a one-line fix."""
    try:
        return importlib.import_module("s3prl.nn")
    except Exception as err:  # ImportError, or OSError/RuntimeError from a mismatched torchaudio build
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise S3PRLUnavailableError(
            f"cannot import s3prl ({type(err).__name__}: {first_line}); {INSTALL_HINT}"
        ) from err


def _s3prl_version() -> str:
    try:
        return importlib.metadata.version("s3prl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class S3PRLUpstream(Upstream):
    """Adapter over ``s3prl.nn.S3PRLUpstream``.

    Args:
        name: s3prl upstream name (e.g. ``hubert``, ``wavlm_large``, ``fbank``).
        path_or_url, refresh, extra_conf: passed to s3prl.
        randomize: re-initialise every submodule with ``reset_parameters`` under ``seed``.
        pad_invariant: declare that s3prl's own padding leaves each clip unchanged (default False).
        min_samples: shortest clip accepted (default 400, the wav2vec2-style receptive field).
    """

    family = "s3prl"

    def __init__(
        self,
        name: str,
        path_or_url: str | None = None,
        refresh: bool = False,
        extra_conf: dict | None = None,
        randomize: bool = False,
        seed: int = 0,
        pad_invariant: bool = False,
        min_samples: int = 400,
        display_name: str | None = None,
        sample_rate: int = SAMPLE_RATE,
    ):
        super().__init__()
        s3prl_nn = import_s3prl_nn()
        self.upstream_name = name
        self.path_or_url = path_or_url
        self.extra_conf = dict(extra_conf or {})
        self.randomize = bool(randomize)
        self.seed = int(seed)
        self.display_name = display_name
        self.sample_rate = int(sample_rate)
        self.model = s3prl_nn.S3PRLUpstream(name, path_or_url=path_or_url, refresh=refresh, extra_conf=self.extra_conf)
        if self.randomize:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                for module in self.model.modules():
                    if hasattr(module, "reset_parameters"):
                        module.reset_parameters()
        self.model.eval()
        self.model.requires_grad_(False)

        hidden_sizes = list(self.model.hidden_sizes)
        rates = list(self.model.downsample_rates)
        if len(set(hidden_sizes)) != 1:
            raise ValueError(f"s3prl upstream '{name}' has layers of different widths {hidden_sizes}; not supported")
        if len(set(rates)) != 1:
            raise ValueError(f"s3prl upstream '{name}' has layers at different frame rates {rates}; not supported")
        self.num_layers = int(self.model.num_layers)
        self.hidden_size = int(hidden_sizes[0])
        self.frame_rate = self.sample_rate / rates[0]
        self.min_samples = int(min_samples)
        self.pad_invariant = bool(pad_invariant)

    def train(self, mode: bool = True) -> "S3PRLUpstream":
        """Always eval (the contract)."""
        return super().train(False)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return forward_batch_invariant(
            self._forward_batch, wavs, lengths, pad_invariant=self.pad_invariant, min_samples=self.min_samples,
            upstream=self.name)

    def _forward_batch(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        all_hs, all_lens = self.model(wavs[:, : int(lengths.max())].float(), lengths)
        if len(all_hs) != self.num_layers or len(all_lens) != self.num_layers:
            raise RuntimeError(
                f"s3prl upstream '{self.upstream_name}' returned {len(all_hs)} layers, expected {self.num_layers}"
            )
        frame_lengths = torch.as_tensor(all_lens[0], device=wavs.device).long()
        for layer, layer_lens in enumerate(all_lens[1:], start=1):
            if not torch.equal(torch.as_tensor(layer_lens, device=wavs.device).long(), frame_lengths):
                raise RuntimeError(
                    f"s3prl upstream '{self.upstream_name}': layer {layer} has other valid lengths than layer 0"
                )
        kept = int(frame_lengths.max())
        states = []
        for hs in all_hs:
            if hs.shape[1] < kept:
                raise RuntimeError(
                    f"s3prl upstream '{self.upstream_name}' returned {hs.shape[1]} frames but lengths up to {kept}"
                )
            states.append(hs[:, :kept].float())
        return states, frame_lengths

    @property
    def name(self) -> str:
        return self.display_name or f"s3prl:{self.upstream_name}"

    def fingerprint_fields(self) -> dict:
        return {
            "upstream": "s3prl",
            "s3prl_name": self.upstream_name,
            "path_or_url": self.path_or_url,
            "extra_conf": self.extra_conf,
            "s3prl": _s3prl_version(),
            "layer_convention": "s3prl-native",
            "randomize": self.randomize,
            "seed": self.seed if self.randomize else None,
        }
