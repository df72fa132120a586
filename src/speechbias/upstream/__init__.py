"""Upstream models: waveforms in, per-layer hidden states out (contract in :mod:`.base`).

Families: :class:`HFUpstream` (wav2vec2, HuBERT, WavLM, Whisper via transformers; one adapter per
family in :mod:`.families`), :class:`FbankUpstream` / :class:`MfccUpstream` (weight-free),
:class:`S3PRLUpstream` (optional s3prl).
Exports load lazily so that ``import speechbias.upstream.base`` does not import transformers, and
``import speechbias.upstream.deferred`` (a task's upstream before it is built) does not import torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Upstream": "speechbias.upstream.base",
    "HFUpstream": "speechbias.upstream.hf",
    "MissingWeightsError": "speechbias.model_loading",
    "FbankUpstream": "speechbias.upstream.classical",
    "MfccUpstream": "speechbias.upstream.classical",
    "S3PRLUpstream": "speechbias.upstream.s3prl",
    "S3PRLUnavailableError": "speechbias.upstream.s3prl_import",
    "S3PRLUpstreamError": "speechbias.upstream.s3prl",
    "LAYER_CONVENTION": "speechbias.upstream.block_states",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'speechbias.upstream' has no attribute '{name}'")
