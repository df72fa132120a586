"""Tiny random models of every HF family, built from inline configs (no hub, no weights), and test audio."""

from __future__ import annotations

import torch

from speechbias.upstream.hf import HFUpstream

W2V_TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "conv_dim": [16] * 7,
    "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
    "conv_stride": [5, 2, 2, 2, 2, 2, 2],
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
}
WHISPER_TINY = {
    "d_model": 32,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_layers": 1,
    "decoder_attention_heads": 2,
    "decoder_ffn_dim": 64,
    "num_mel_bins": 80,
    "max_source_positions": 1500,
    "max_target_positions": 32,
    "vocab_size": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}
# (family, stable): stable = layer-norm feature encoder + pre-LN ("stable layer norm") blocks
VARIANTS = [
    ("wav2vec2", False),
    ("wav2vec2", True),
    ("hubert", False),
    ("hubert", True),
    ("wavlm", False),
    ("wavlm", True),
    ("whisper", False),
]
VARIANT_IDS = [f"{f}-{'stable' if s else 'base'}" if f != "whisper" else f for f, s in VARIANTS]


def tiny_config(family: str, stable: bool = False) -> dict:
    if family == "whisper":
        return dict(WHISPER_TINY)
    return {**W2V_TINY, "feat_extract_norm": "layer" if stable else "group", "do_stable_layer_norm": stable}


def build_tiny(family: str, stable: bool = False, seed: int = 0, **kwargs) -> HFUpstream:
    return HFUpstream.from_config_dict(family, tiny_config(family, stable), seed=seed, **kwargs)


def perturb_layer_norms(module: torch.nn.Module, seed: int = 1) -> None:
    """Give every LayerNorm non-trivial affine parameters, so that applying one more LayerNorm
    (the final one the layer convention excludes) visibly changes the states."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                sub.weight.copy_(1.0 + 0.5 * torch.randn(sub.weight.shape, generator=gen))
                sub.bias.copy_(0.5 * torch.randn(sub.bias.shape, generator=gen))


def random_wavs(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, max) zero-padded noise clips with a per-clip gain, and their lengths."""
    gen = torch.Generator().manual_seed(seed)
    wavs = torch.zeros(len(lengths), max(lengths))
    for row, n in enumerate(lengths):
        wavs[row, :n] = (0.1 + 0.2 * row) * torch.randn(n, generator=gen)
    return wavs, torch.tensor(lengths)
