"""The sizes of an upstream read from its composed config, without building it (no torch, no transformers).

:func:`architecture_of` gives an :class:`Architecture` (frame rate, layers kept, width, attention heads, the
conv front end's first layer, parameters) from ``conf/upstream/<name>.yaml`` as composed: a weight-free
fbank/mfcc from its settings; an inline test model (``config:``) from that config over transformers'
defaults of its family; a hub model from its ``config.json`` in a local folder or the local Hugging Face
cache, else from :data:`HUB_ARCHITECTURES` (the figures of the 16 shipped models' hub configs); anything
else (s3prl, an unknown hub id) as :data:`LARGEST` (the largest paper model, with WavLM's attention: an
upper bound). Read by the clip-length limit (:mod:`speechbias.features.clip_memory`) and the free-space
estimate (``speechbias.launch.storage_check``: states x width of a cache entry).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

SAMPLE_RATE = 16_000  # Hz: every upstream reads 16 kHz audio (speechbias.fileio.audio.SAMPLE_RATE)


@dataclass(frozen=True)
class Architecture:
    """What a clip's forward holds, per family. ``kind``: wav2vec2 | hubert | wavlm | whisper | fbank.
    ``frame_rate`` frames/s of the kept states; ``states`` hidden states kept (layers + 1); ``width`` D (the
    features per state: fbank's n_mels, mfcc's n_mfcc);
    ``heads`` attention heads; ``ffn`` the feed-forward width; ``front_channels`` / ``front_stride`` the
    first conv layer's output channels and stride (samples) (fbank: FFT bins and hop); ``layer_norm_front``
    a layer-norm conv front end (two more copies of its output); ``parameters`` of the loaded model;
    ``window_seconds`` the longest clip the model takes (Whisper's 30 s window), None: no such limit;
    ``source`` where the figures come from."""

    kind: str
    frame_rate: float
    states: int
    width: int
    heads: int = 0
    ffn: int = 0
    front_channels: int = 0
    front_stride: int = 1
    layer_norm_front: bool = False
    parameters: int = 0
    window_seconds: float | None = None
    source: str = ""


def wav2vec2_like(kind: str, config: dict, source: str) -> Architecture:
    """wav2vec2 / HuBERT / WavLM sizes from a transformers config dict (transformers' defaults, the base
    architecture, for a key it lacks)."""
    width = int(config.get("hidden_size", 768))
    layers = int(config.get("num_hidden_layers", 12))
    ffn = int(config.get("intermediate_size", 3072))
    conv_dim = [int(c) for c in config.get("conv_dim", [512] * 7)]
    kernels = [int(k) for k in config.get("conv_kernel", [10, 3, 3, 3, 3, 2, 2])]
    strides = [int(s) for s in config.get("conv_stride", [5, 2, 2, 2, 2, 2, 2])]
    positions = int(config.get("num_conv_pos_embeddings", 128))
    groups = int(config.get("num_conv_pos_embedding_groups", 16))
    conv = sum(c_out * c_in * k for c_in, c_out, k in zip([1, *conv_dim], conv_dim, kernels))
    parameters = layers * (4 * width * width + 2 * width * ffn) + width * width * positions // groups
    parameters += conv + conv_dim[-1] * width
    return Architecture(
        kind=kind,
        frame_rate=SAMPLE_RATE / math.prod(strides),
        states=layers + 1,
        width=width,
        heads=int(config.get("num_attention_heads", 12)),
        ffn=ffn,
        front_channels=conv_dim[0],
        front_stride=strides[0],
        layer_norm_front=config.get("feat_extract_norm", "group") == "layer",
        parameters=parameters,
        source=source,
    )


def whisper(config: dict, source: str) -> Architecture:
    """Whisper's encoder sizes (transformers' WhisperConfig defaults for a key the dict lacks); the whole
    model is loaded (decoder too), so its parameters count both."""
    width = int(config.get("d_model", 384))
    layers = int(config.get("encoder_layers", 4))
    ffn = int(config.get("encoder_ffn_dim", 1536))
    decoder_layers = int(config.get("decoder_layers", 4))
    decoder_ffn = int(config.get("decoder_ffn_dim", 1536))
    vocab = int(config.get("vocab_size", 51865))
    mels = int(config.get("num_mel_bins", 80))
    encoder = layers * (4 * width * width + 2 * width * ffn) + 3 * width * (mels + width) + 1500 * width
    decoder = decoder_layers * (8 * width * width + 2 * width * decoder_ffn) + vocab * width
    return Architecture(
        kind="whisper",
        frame_rate=50.0,  # 100 mel frames/s, conv2 stride 2
        states=layers + 1,
        width=width,
        heads=int(config.get("encoder_attention_heads", 6)),
        ffn=ffn,
        front_channels=width,  # conv1 over 100 mel frames/s
        front_stride=160,
        parameters=encoder + decoder,
        window_seconds=30.0,
        source=source,
    )


def _hub(kind: str, width: int, layers: int, heads: int, layer_norm: bool) -> dict:
    return {
        "model_type": kind,
        "hidden_size": width,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * width,
        "feat_extract_norm": "layer" if layer_norm else "group",
    }


def _whisper_hub(width: int, layers: int, heads: int, vocab: int = 51865) -> dict:
    return {
        "model_type": "whisper",
        "d_model": width,
        "encoder_layers": layers,
        "encoder_attention_heads": heads,
        "encoder_ffn_dim": 4 * width,
        "decoder_layers": layers,
        "decoder_ffn_dim": 4 * width,
        "vocab_size": vocab,
    }


# the sizes in the config.json of each shipped hub model (conf/upstream/*.yaml), for a machine whose
# Hugging Face cache does not hold it yet: hidden size, blocks, heads, feed-forward 4x, conv front end
# (512 channels, first stride 5; layer-norm for the large/lv60 checkpoints), Whisper's encoder and decoder
HUB_CONFIGS: dict[str, dict] = {
    "facebook/wav2vec2-base": _hub("wav2vec2", 768, 12, 12, False),
    "facebook/wav2vec2-large": _hub("wav2vec2", 1024, 24, 16, False),
    "facebook/wav2vec2-large-lv60": _hub("wav2vec2", 1024, 24, 16, True),
    "facebook/hubert-base-ls960": _hub("hubert", 768, 12, 12, False),
    "facebook/hubert-large-ll60k": _hub("hubert", 1024, 24, 16, True),
    "facebook/hubert-xlarge-ll60k": _hub("hubert", 1280, 48, 16, True),
    "microsoft/wavlm-base": _hub("wavlm", 768, 12, 12, False),
    "microsoft/wavlm-base-plus": _hub("wavlm", 768, 12, 12, False),
    "microsoft/wavlm-large": _hub("wavlm", 1024, 24, 16, True),
    "openai/whisper-base": _whisper_hub(512, 6, 8),
    "openai/whisper-base.en": _whisper_hub(512, 6, 8, 51864),
    "openai/whisper-small": _whisper_hub(768, 12, 12),
    "openai/whisper-small.en": _whisper_hub(768, 12, 12, 51864),
    "openai/whisper-medium": _whisper_hub(1024, 24, 16),
    "openai/whisper-medium.en": _whisper_hub(1024, 24, 16, 51864),
    "openai/whisper-large": _whisper_hub(1280, 32, 20),
}

# an upstream whose sizes are not known without building it: HuBERT-XL's sizes (49 states of 1280, the
# largest paper model) with WavLM's attention (the only family whose memory grows with the square of a clip)
LARGEST = replace(
    wav2vec2_like("wavlm", _hub("wavlm", 1280, 48, 16, True), ""),
    source="not known before the model is built: taken as the largest paper model",
)


def from_config_dict(config: dict, source: str, family: str | None = None) -> Architecture:
    """The architecture of a transformers config dict (``model_type`` or ``family`` names the family)."""
    kind = str(family or config.get("model_type") or "")
    if kind == "whisper":
        return whisper(config, source)
    if kind in ("wav2vec2", "hubert", "wavlm"):
        return wav2vec2_like(kind, config, source)
    return replace(LARGEST, source=f"{source}: family {kind or 'unknown'} not known; {LARGEST.source}")


def _cached_config(model_id: str, revision) -> dict | None:
    """``config.json`` of a local model folder or of the hub id in the local Hugging Face cache (no
    download); None when neither holds it."""
    try:
        folder = Path(model_id).expanduser()
        if folder.is_dir():
            found = folder / "config.json"
        else:
            import huggingface_hub

            cached = huggingface_hub.try_to_load_from_cache(model_id, "config.json", revision=revision or None)
            if not isinstance(cached, str):
                return None
            found = Path(cached)
        config = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError, ImportError):
        return None
    return config if isinstance(config, dict) else None


def architecture_of(upstream: DictConfig | None) -> Architecture:
    """The :class:`Architecture` of a composed upstream config node (see the module docstring)."""
    if upstream is None:
        return LARGEST
    target = str(OmegaConf.select(upstream, "_target_", default="") or "")
    if target.endswith(("FbankUpstream", "MfccUpstream")):
        from speechbias.upstream.classical_fingerprint import MfccConfig

        default = MfccConfig()  # fbank's and mfcc's defaults (mfcc's are fbank's and n_mfcc)
        hop = default.samples(float(OmegaConf.select(upstream, "hop_ms", default=default.hop_ms)))
        n_fft = int(OmegaConf.select(upstream, "n_fft", default=default.n_fft))
        width = OmegaConf.select(upstream, "n_mels", default=default.n_mels)
        if target.endswith("MfccUpstream"):
            width = OmegaConf.select(upstream, "n_mfcc", default=default.n_mfcc) or default.n_mfcc
        return Architecture(
            kind="fbank",
            frame_rate=SAMPLE_RATE / max(hop, 1),
            states=1,
            width=int(width),
            front_channels=n_fft,
            front_stride=max(hop, 1),
            source="the upstream's settings",
        )
    family = OmegaConf.select(upstream, "family", default=None)
    inline = OmegaConf.select(upstream, "config", default=None)
    if isinstance(inline, DictConfig):
        config = {"model_type": OmegaConf.select(upstream, "model_type", default=None)}
        config.update(OmegaConf.to_container(inline, resolve=True))
        return from_config_dict(config, "the upstream's inline config", family)
    model_id = OmegaConf.select(upstream, "model_id", default=None)
    if not isinstance(model_id, str) or not model_id:
        return LARGEST
    config = _cached_config(model_id, OmegaConf.select(upstream, "revision", default=None))
    if config is not None:
        return from_config_dict(config, f"{model_id}'s config.json", family)
    if model_id in HUB_CONFIGS:
        return from_config_dict(HUB_CONFIGS[model_id], f"{model_id}'s published config (no local copy)", family)
    return replace(LARGEST, source=f"{model_id}: no local config.json; {LARGEST.source}")
