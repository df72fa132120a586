"""conf/upstream/*.yaml: every file loads, names the paper's real hub ids, states the layer
convention, accepts randomize; the weight-free and tiny ones instantiate offline."""

from __future__ import annotations

import hydra.utils
import pytest
import torch
from omegaconf import OmegaConf

from speechbias.model_loading import MissingWeightsError
from speechbias.upstream.hf import HFUpstream
from upstream.tiny_models import build_tiny, random_wavs

# the 16 models of the SpEAT paper: pre-trained checkpoints only, none fine-tuned
PAPER_MODELS = {
    "wav2vec2_base": ("facebook/wav2vec2-base", "wav2vec2"),
    "wav2vec2_large": ("facebook/wav2vec2-large", "wav2vec2"),
    "wav2vec2_large_lv60": ("facebook/wav2vec2-large-lv60", "wav2vec2"),
    "hubert_base": ("facebook/hubert-base-ls960", "hubert"),
    "hubert_large": ("facebook/hubert-large-ll60k", "hubert"),
    "hubert_xl": ("facebook/hubert-xlarge-ll60k", "hubert"),
    "wavlm_base": ("microsoft/wavlm-base", "wavlm"),
    "wavlm_base_plus": ("microsoft/wavlm-base-plus", "wavlm"),
    "wavlm_large": ("microsoft/wavlm-large", "wavlm"),
    "whisper_base": ("openai/whisper-base", "whisper"),
    "whisper_base_en": ("openai/whisper-base.en", "whisper"),
    "whisper_small": ("openai/whisper-small", "whisper"),
    "whisper_small_en": ("openai/whisper-small.en", "whisper"),
    "whisper_medium": ("openai/whisper-medium", "whisper"),
    "whisper_medium_en": ("openai/whisper-medium.en", "whisper"),
    "whisper_large": ("openai/whisper-large", "whisper"),
}
OFFLINE_CONFIGS = [
    "fbank",
    "mfcc",
    "tiny_wav2vec2",
    "tiny_wav2vec2_stable",
    "tiny_hubert",
    "tiny_wavlm",
    "tiny_whisper",
]


def upstream_dir(conf_dir):
    return conf_dir / "upstream"


def test_every_upstream_config_loads_and_accepts_randomize(conf_dir):
    files = sorted(upstream_dir(conf_dir).glob("*.yaml"))
    assert len(files) >= len(PAPER_MODELS) + len(OFFLINE_CONFIGS) + 1
    for path in files:
        cfg = OmegaConf.load(path)
        assert cfg._target_.startswith("speechbias.upstream."), path.name
        assert "randomize" in cfg, f"{path.name} lacks randomize"
        assert "display_name" in cfg, path.name
        if ".hf." in cfg._target_:
            assert cfg.layer_convention == "block-io-v1", path.name
            assert "layer 0 = input to the first transformer block" in path.read_text(), path.name


def test_paper_models_use_the_real_pretrained_hub_ids(conf_dir):
    for name, (model_id, family) in PAPER_MODELS.items():
        cfg = OmegaConf.load(upstream_dir(conf_dir) / f"{name}.yaml")
        assert cfg.model_id == model_id and cfg.family == family, name
        assert cfg.randomize is False
        assert not any(tag in model_id for tag in ("960h", "-ft", "ls960-ft", "finetuned")), name
    assert "large-v1" in (upstream_dir(conf_dir) / "whisper_large.yaml").read_text()


@pytest.mark.parametrize("name", OFFLINE_CONFIGS)
def test_offline_configs_instantiate_and_run(conf_dir, name):
    cfg = OmegaConf.load(upstream_dir(conf_dir) / f"{name}.yaml")
    up = hydra.utils.instantiate(cfg)
    wavs, lengths = random_wavs([4_000, 2_000])
    states, frame_lengths = up(wavs, lengths)
    assert len(states) == up.num_layers and states[0].shape[-1] == up.hidden_size
    assert frame_lengths.shape == (2,)


def test_tiny_config_equals_the_inline_test_model(conf_dir):
    from_yaml = hydra.utils.instantiate(OmegaConf.load(upstream_dir(conf_dir) / "tiny_wav2vec2_stable.yaml"))
    inline = build_tiny("wav2vec2", stable=True, seed=0)
    assert from_yaml.fingerprint == inline.fingerprint
    for p, q in zip(from_yaml.parameters(), inline.parameters()):
        assert torch.equal(p, q)


def test_generic_hf_entry_takes_a_local_directory(conf_dir, tmp_path):
    build_tiny("hubert", stable=True).model.save_pretrained(tmp_path)
    cfg = OmegaConf.create({"model_id": str(tmp_path), "upstream": OmegaConf.load(upstream_dir(conf_dir) / "hf.yaml")})
    up = hydra.utils.instantiate(cfg.upstream)
    assert isinstance(up, HFUpstream) and up.family == "hubert" and up.name == str(tmp_path)


def test_a_paper_model_with_randomize_needs_only_its_config(conf_dir, tmp_path):
    """`upstream=hubert_xl upstream.randomize=true` offline and uncached: the one clear error."""
    cfg = OmegaConf.load(upstream_dir(conf_dir) / "hubert_xl.yaml")
    cfg.randomize = True
    cfg.cache_dir = str(tmp_path)
    with pytest.raises(Exception) as caught:
        hydra.utils.instantiate(cfg)
    error = caught.value
    while not isinstance(error, MissingWeightsError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, MissingWeightsError)
    assert "facebook/hubert-xlarge-ll60k" in str(error)


@pytest.mark.slow
def test_random_base_architecture_config_builds_a_base_sized_model(conf_dir):
    """~5 s on 2 CPU cores: a 95 M-parameter random init."""
    up = hydra.utils.instantiate(OmegaConf.load(upstream_dir(conf_dir) / "random_wav2vec2_base.yaml"))
    assert (up.num_layers, up.hidden_size, up.pad_invariant, up.min_samples) == (13, 768, False, 400)
