"""Any s3prl upstream (``s3prl.nn.S3PRLUpstream(name)``) behind the Upstream contract.

s3prl is an optional extra, imported only when this class is built (:mod:`.s3prl_import`). Layers
are s3prl's own (``layer_convention = "s3prl-native"``: the hidden_states list the s3prl upstream
returns; for the ``hf_*`` upstreams that is transformers' ``output_hidden_states``).

Valid frames are the frames the model computed for the clip. ``S3PRLUpstream.forward`` stretches
every layer to ``len(range(0, n, rate))`` frames by repeating the last frame and counts the copies
as valid (``hs_len = (n - 1) // rate + 1``: 50 frames for 16,000 samples where wav2vec2 computes 49,
100 where s3prl's fbank computes 98). The adapter therefore calls the s3prl upstream module itself
(``S3PRLUpstream.upstream``, s3prl's expert interface: a list of waveforms -> ``{"hidden_states":
[...]}``), one clip length at a time, so no clip is padded, and keeps ``min(frames computed, hs_len)``
frames. A model whose frame count is not what s3prl's declared downsample rate gives (e.g. a wav2vec2
whose conv stack does not stride 320) is an :class:`S3PRLUpstreamError`, one line, never stretched.
Clips shorter than 0.05 s (800 samples, which s3prl would zero-pad) are an error.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.model_loading import local_weights_digest
from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import forward_batch_invariant
from speechbias.upstream.randomize import RANDOM_INIT, reinitialize
from speechbias.upstream.s3prl_import import S3PRLUnavailableError, import_s3prl_nn, s3prl_version

__all__ = ["S3PRLUpstream", "S3PRLUpstreamError", "S3PRLUnavailableError", "s3prl_frame_mismatch"]

#: s3prl's shortest input (``s3prl.nn.upstream.MIN_SECOND`` x 16 kHz); s3prl zero-pads shorter ones
S3PRL_MIN_SAMPLES = 800
#: how the valid frames are counted (part of the fingerprint)
VALID_FRAMES = "computed-frames-v1"


class S3PRLUpstreamError(ValueError):
    """An s3prl upstream cannot be built or run as configured (unknown name, checkpoint, frame rate);
    the message names the upstream and the fix."""


def s3prl_frame_mismatch(frames: int, samples: int, rate: int) -> bool:
    """True when ``frames`` computed for ``samples`` samples cannot be the output of a model with
    s3prl's declared ``rate``: more than ``max(3, 2 %)`` frames away from s3prl's ``ceil(n / rate)``
    (the few frames a receptive field costs at the end of a clip; 1-2 for wav2vec2, 2-3 for fbank)."""
    expected = math.ceil(samples / rate)
    return abs(frames - expected) > max(3, expected // 50)


def path_signature(path_or_url: str | None) -> list | None:
    """What identifies local checkpoint files: ``[[name, bytes, mtime_ns], ...]`` of a local folder's
    weight files (as for HF local directories) or of a local checkpoint file; None for a URL or None."""
    if not path_or_url:
        return None
    path = Path(path_or_url).expanduser()
    if path.is_dir():
        return local_weights_digest(path)
    if path.is_file():
        stat = path.stat()
        return [[path.name, stat.st_size, stat.st_mtime_ns]]
    return None


class S3PRLUpstream(Upstream):
    """Adapter over ``s3prl.nn.S3PRLUpstream``.

    Args:
        name: s3prl upstream name (e.g. ``hubert``, ``wavlm_large``, ``fbank``, ``hf_wav2vec2_custom``).
        path_or_url, refresh, extra_conf: passed to s3prl (``path_or_url``: checkpoint file, folder or URL).
        randomize: re-initialise every weight under ``seed`` (:func:`speechbias.upstream.randomize.reinitialize`).
        min_samples: shortest clip accepted (default and minimum 800 samples, s3prl's 0.05 s).
        display_name: name in reports; default ``s3prl:<name>`` (``s3prl:<name>@<path_or_url>`` with a checkpoint).
    """

    family = "s3prl"
    pad_invariant = False  # one clip length per forward: valid frames are read from the model's own output

    def __init__(
        self,
        name: str,
        path_or_url: str | None = None,
        refresh: bool = False,
        extra_conf: dict | None = None,
        randomize: bool = False,
        seed: int = 0,
        min_samples: int = S3PRL_MIN_SAMPLES,
        display_name: str | None = None,
        sample_rate: int = SAMPLE_RATE,
    ):
        super().__init__()
        s3prl_nn = import_s3prl_nn()
        self.upstream_name = str(name)
        self.path_or_url = None if path_or_url is None else str(path_or_url)
        self.extra_conf = dict(extra_conf or {})
        self.randomize = bool(randomize)
        self.seed = int(seed)
        self.model_id = f"s3prl:{self.upstream_name}" + (f"@{self.path_or_url}" if self.path_or_url else "")
        self.display_name = display_name or self.model_id
        self.sample_rate = int(sample_rate)
        if self.sample_rate != SAMPLE_RATE:
            raise S3PRLUpstreamError(f"{self.model_id}: s3prl upstreams take {SAMPLE_RATE} Hz audio, not {sample_rate}")
        self.min_samples = max(int(min_samples), S3PRL_MIN_SAMPLES)
        self._weights_signature = path_signature(self.path_or_url)
        self.model = self._build(s3prl_nn, refresh)
        if self.randomize:
            reinitialize(self.model.upstream, self.seed)
        self.model.eval()
        self.model.requires_grad_(False)

        hidden_sizes = list(self.model.hidden_sizes)
        rates = list(self.model.downsample_rates)
        if len(set(hidden_sizes)) != 1:
            raise S3PRLUpstreamError(f"{self.model_id} has layers of different widths {hidden_sizes}; not supported")
        if len(set(rates)) != 1:
            raise S3PRLUpstreamError(f"{self.model_id} has layers at different frame rates {rates}; not supported")
        self.num_layers = int(self.model.num_layers)
        self.hidden_size = int(hidden_sizes[0])
        self.downsample_rate = int(rates[0])
        self.frame_rate = self.sample_rate / self.downsample_rate

    def _build(self, s3prl_nn, refresh: bool):
        """``s3prl.nn.S3PRLUpstream`` with the user's errors (unknown name, missing checkpoint, a model
        s3prl's probe forward rejects) as one :class:`S3PRLUpstreamError` line."""
        hub = s3prl_nn.S3PRLUpstream.available_names() if hasattr(s3prl_nn.S3PRLUpstream, "available_names") else None
        if hub is not None and self.upstream_name not in hub:
            close = sorted(n for n in hub if self.upstream_name.split("_")[0] in n)[:8]
            raise S3PRLUpstreamError(
                f"'{self.upstream_name}' is not an s3prl upstream name (s3prl {s3prl_version()}); "
                f'similar: {", ".join(close) or "none"}; all: `python -c "from s3prl.nn import S3PRLUpstream; '
                f'print(S3PRLUpstream.available_names())"`'
            )
        if self.path_or_url and "://" not in self.path_or_url and not Path(self.path_or_url).expanduser().exists():
            raise S3PRLUpstreamError(f"{self.model_id}: path_or_url '{self.path_or_url}' does not exist")
        try:
            return s3prl_nn.S3PRLUpstream(
                self.upstream_name, path_or_url=self.path_or_url, refresh=refresh, extra_conf=self.extra_conf
            )
        except (AssertionError, OSError, ValueError, KeyError, RuntimeError) as err:  # requests' errors are OSErrors
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise S3PRLUpstreamError(
                f"s3prl could not build {self.model_id} ({type(err).__name__}: {reason}); check upstream.name and "
                f"upstream.path_or_url (s3prl downloads a registered checkpoint on first use; offline, pass a local "
                f"one), or load a transformers checkpoint with upstream=hf model_id=<path>"
            ) from err

    def train(self, mode: bool = True) -> S3PRLUpstream:
        """Always eval (the contract)."""
        return super().train(False)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return forward_batch_invariant(
            self._forward_batch, wavs, lengths, pad_invariant=False, min_samples=self.min_samples, upstream=self.name
        )

    def _forward_batch(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Clips of one length (``run_in_length_groups``): the s3prl expert's states, cut to the frames it
        computed and s3prl counts."""
        samples = int(lengths[0])
        if not torch.all(lengths == samples):
            raise RuntimeError("S3PRLUpstream._forward_batch takes clips of one length")
        hidden_states = self.model.upstream([wav for wav in wavs[:, :samples].float()])["hidden_states"]
        if len(hidden_states) != self.num_layers:
            raise S3PRLUpstreamError(
                f"{self.model_id} returned {len(hidden_states)} layers, {self.num_layers} when it was built"
            )
        counted = math.ceil(samples / self.downsample_rate)  # s3prl's hs_len: (n - 1) // rate + 1
        states = []
        for layer, hs in enumerate(hidden_states):
            computed = int(hs.shape[1])
            if s3prl_frame_mismatch(computed, samples, self.downsample_rate):
                raise S3PRLUpstreamError(
                    f"{self.model_id} computed {computed} frames (layer {layer}) for a {samples}-sample clip, but "
                    f"s3prl declares one frame per {self.downsample_rate} samples ({counted} frames): the checkpoint's "
                    f"frame rate is not the one s3prl assumes for '{self.upstream_name}' (e.g. a conv stack that does "
                    f"not stride {self.downsample_rate}); load a transformers checkpoint with upstream=hf model_id=<path>"
                )
            states.append(hs[:, : min(computed, counted)].float())
        valid = min(state.shape[1] for state in states)
        frame_lengths = torch.full((wavs.shape[0],), valid, dtype=torch.long, device=wavs.device)
        return [state[:, :valid] for state in states], frame_lengths

    @property
    def name(self) -> str:
        return self.display_name

    def fingerprint_fields(self) -> dict:
        return {
            "upstream": "s3prl",
            "model_id": self.model_id,
            "s3prl_name": self.upstream_name,
            "path_or_url": self.path_or_url,
            "local_files": self._weights_signature,
            "extra_conf": self.extra_conf,
            "s3prl": s3prl_version(),
            "layer_convention": "s3prl-native",
            "valid_frames": VALID_FRAMES,
            "randomize": self.randomize,
            "seed": self.seed if self.randomize else None,
            **({"random_init": RANDOM_INIT} if self.randomize else {}),
        }
