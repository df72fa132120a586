"""The upstream contract (after s3prl's ``nn/upstream.py``): waveforms in, per-layer states out.

``forward(wavs, lengths) -> (hidden_states, frame_lengths)``

* ``wavs``: float32 tensor (B, S) at ``sample_rate`` Hz, zero-padded after each clip's end.
* ``lengths``: int64 tensor (B,) of valid samples per clip.
* ``hidden_states``: list of ``num_layers`` tensors, each (B, T, ``hidden_size``).
* ``frame_lengths``: int64 tensor (B,) of valid frames per clip (frames past it are padding).

Layer convention (every family): layer 0 is the input to the first transformer block, layer l is
the output of block l exactly as the block emits it (no extra final LayerNorm). One-layer baselines
(fbank, mfcc) have only layer 0.

Batch invariance: a clip's states must not depend on the rest of its batch. Upstreams for which
zero padding changes the result (group-norm feature extractors without an attention mask) set
``pad_invariant = False`` and the extractor never batches clips of different lengths for them.
Upstreams run in eval mode and under ``torch.no_grad``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.model_loading import FingerprintedModel


class Upstream(FingerprintedModel, nn.Module, ABC):
    """Base class of every upstream; subclasses fill the attributes in ``__init__``."""

    num_layers: int
    hidden_size: int
    frame_rate: float  # frames per second of the hidden states
    sample_rate: int = SAMPLE_RATE
    min_samples: int = 1  # shortest input (samples) that yields at least one frame
    pad_invariant: bool = True  # zero-padding in a batch leaves each clip's states unchanged
    family: str = "other"  # wav2vec2 | hubert | wavlm | whisper | classical | s3prl | ...

    @abstractmethod
    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]: ...

    @abstractmethod
    def fingerprint_fields(self) -> dict:
        """What determines this upstream's outputs: model id, revision, layer convention, dtype,
        library version, randomisation seed... Must be JSON-serialisable."""

    @property
    def name(self) -> str:
        return str(self.fingerprint_fields().get("name", type(self).__name__))


def frames_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Valid-frame counts (B,) from a (B, T) boolean/int attention mask."""
    return mask.long().sum(dim=-1)
