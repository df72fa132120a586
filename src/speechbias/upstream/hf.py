"""Hugging Face speech encoders (wav2vec2, HuBERT, WavLM, Whisper) behind the Upstream contract.

Layers follow ``block-io-v1`` (see :mod:`speechbias.upstream.block_states`): layer 0 is the input to
the first transformer block, layer l the output of block l as emitted, no final LayerNorm; so
``num_layers = n_blocks + 1`` (13 for base models, 25 for large, 49 for HuBERT XL; Whisper base 7,
small 13, medium 25, large 33).

* wav2vec2 / HuBERT / WavLM: 16 kHz waveform in, frames at 50 Hz. Valid frames come from the
  conv feature encoder's length formula. Models with a layer-norm feature encoder
  (``feat_extract_norm == "layer"``) get an attention mask and are pad-invariant; group-norm ones
  (base-style) normalise each channel over the whole input, so zero padding changes every frame:
  they have ``pad_invariant = False`` and a mixed-length batch is run one length at a time.
* Whisper: encoder only. Every clip gets its own 30 s log-mel window (clips over 30 s raise
  ValueError; no chunking), and only the ``(mel_frames - 1)//2 + 1`` encoder frames that cover
  real audio are kept (mel_frames = ceil(samples / 160)).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence

import torch
import transformers
from transformers import (
    HubertConfig,
    HubertModel,
    PretrainedConfig,
    Wav2Vec2Config,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Model,
    WavLMConfig,
    WavLMModel,
    WhisperConfig,
    WhisperModel,
)

from speechbias.upstream import whisper_frontend
from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import forward_batch_invariant, zero_padding
from speechbias.upstream.block_states import LAYER_CONVENTION, BlockStateRecorder
from speechbias.upstream.hub_loading import (
    MissingWeightsError,
    cache_first,
    local_dir,
    local_files_signature,
    missing_weights_message,
)

log = logging.getLogger(__name__)

FAMILIES: dict[str, tuple[type[PretrainedConfig], type[torch.nn.Module]]] = {
    "wav2vec2": (Wav2Vec2Config, Wav2Vec2Model),
    "hubert": (HubertConfig, HubertModel),
    "wavlm": (WavLMConfig, WavLMModel),
    "whisper": (WhisperConfig, WhisperModel),
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SAMPLE_RATE = 16_000


def receptive_field(kernels: Sequence[int], strides: Sequence[int]) -> int:
    """Samples seen by one output frame of a stack of unpadded 1-D convolutions."""
    field = 1
    for kernel, stride in zip(reversed(list(kernels)), reversed(list(strides))):
        field = (field - 1) * stride + kernel
    return field


def zero_mean_unit_variance(wavs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per-clip normalisation over valid samples, as Wav2Vec2FeatureExtractor(do_normalize=True):
    (x - mean) / sqrt(var + 1e-7), population variance, padding left at 0. wavs (B, S)."""
    valid = (torch.arange(wavs.shape[1], device=wavs.device)[None, :] < lengths[:, None]).to(wavs.dtype)
    count = lengths[:, None].to(wavs.dtype)
    mean = (wavs * valid).sum(dim=1, keepdim=True) / count
    var = (((wavs - mean) * valid) ** 2).sum(dim=1, keepdim=True) / count
    return (wavs - mean) / torch.sqrt(var + 1e-7) * valid


def _plain(value):
    """A config value (possibly an OmegaConf node) as plain JSON-able Python."""
    if isinstance(value, Mapping) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    return value


def _sha256_json(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _family_of(config: PretrainedConfig, requested: str | None, source: str) -> str:
    detected = getattr(config, "model_type", None)
    if detected not in FAMILIES:
        raise ValueError(
            f"{source}: model_type '{detected}' is not supported by HFUpstream "
            f"(supported: {', '.join(FAMILIES)}); use the s3prl upstream for other models"
        )
    if requested is not None and requested != detected:
        raise ValueError(f"{source}: family '{requested}' was requested but the model config says '{detected}'")
    return detected


def _bake_parametrizations(model: torch.nn.Module) -> None:
    """Replace parametrized weights (wav2vec2's weight-normed positional conv) by their values.

    The upstream is frozen, so the computation is unchanged; without parametrizations the module
    pickles, which ``ddp_spawn`` (the strategy for DDP inside Hydra multiruns) needs.
    """
    from torch.nn.utils import parametrize

    for module in model.modules():
        if parametrize.is_parametrized(module):
            for name in list(module.parametrizations.keys()):
                parametrize.remove_parametrizations(module, name, leave_parametrized=True)
        # weight_norm also leaves a local-function load_state_dict hook behind; it has nothing to convert now
        hooks = module._load_state_dict_pre_hooks
        for key in [k for k, h in hooks.items() if "_weight_norm_compat_hook" in getattr(h, "__qualname__", repr(h))]:
            del hooks[key]


class HFUpstream(Upstream):
    """A transformers speech encoder; see the module docstring for conventions.

    Args:
        model_id: hub id (e.g. ``facebook/hubert-large-ll60k``) or a local model directory.
        revision: hub branch, tag or commit (None = the default branch). The commit actually loaded
            enters the fingerprint.
        family: expected family (wav2vec2|hubert|wavlm|whisper); checked against the config.
        randomize: build the architecture from its config with a seeded random init instead of
            loading weights (random-network control; needs only config.json).
        seed: seed of the random init (used when randomize or for config-dict models).
        dtype: float32 | float16 | bfloat16 compute dtype; states are returned as float32.
        normalize: per-clip zero-mean unit-variance of the waveform (wav2vec2 family). None = the
            model's preprocessor_config.json ``do_normalize``; without one, True for layer-norm
            feature encoders and False for group-norm ones (the fairseq pre-training setting).
        layer_convention: must be ``block-io-v1`` (stated in every config).
        display_name: a readable name for reports (not part of the fingerprint).
        cache_dir: Hugging Face cache directory (None = HF_HOME's).
    """

    def __init__(
        self,
        model_id: str | None = None,
        revision: str | None = None,
        family: str | None = None,
        randomize: bool = False,
        seed: int = 0,
        dtype: str = "float32",
        normalize: bool | None = None,
        layer_convention: str = LAYER_CONVENTION,
        display_name: str | None = None,
        cache_dir: str | None = None,
        *,
        model_type: str | None = None,
        config: Mapping | None = None,
    ):
        super().__init__()
        if dtype not in DTYPES:
            raise ValueError(f"dtype '{dtype}' is not one of {sorted(DTYPES)}")
        if layer_convention != LAYER_CONVENTION:
            raise ValueError(f"layer_convention '{layer_convention}' is not supported; use '{LAYER_CONVENTION}'")
        if (model_id is None) == (config is None):
            raise ValueError(
                "HFUpstream needs exactly one of model_id (a hub id or local directory; on the command line "
                "`upstream=hf model_id=<id>`) or model_type + config (an inline random model)"
            )
        self.dtype_name = dtype
        self.torch_dtype = DTYPES[dtype]
        self.randomize = bool(randomize)
        self.seed = int(seed)
        self.display_name = display_name
        self.model_id = model_id
        self.revision = revision
        source = model_id if model_id is not None else f"config dict ({model_type})"

        local_path = local_dir(model_id) if model_id is not None else None
        self._local_signature = local_files_signature(local_path) if local_path is not None else None
        load_kwargs = {"revision": revision, "cache_dir": cache_dir}

        if config is not None:
            if not self.randomize:
                raise ValueError("a config-dict model has no pre-trained weights: randomize must be true")
            if model_type not in FAMILIES:
                raise ValueError(f"model_type '{model_type}' is not one of {', '.join(FAMILIES)}")
            config_dict = _plain(config)
            hf_config = FAMILIES[model_type][0](**config_dict)
            self.config_sha256 = _sha256_json({"model_type": model_type, "config": config_dict})
        else:
            try:
                hf_config = cache_first(transformers.AutoConfig.from_pretrained, model_id, **load_kwargs)
            except OSError as err:
                raise MissingWeightsError(missing_weights_message(model_id, "config", err)) from err
            self.config_sha256 = _sha256_json(hf_config.to_dict())
        self.family = _family_of(hf_config, family, source)
        self.resolved_commit = getattr(hf_config, "_commit_hash", None)
        model_cls = FAMILIES[self.family][1]

        if self.randomize:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                model = model_cls(hf_config)
            model = model.to(self.torch_dtype)
        else:
            try:
                model = cache_first(model_cls.from_pretrained, model_id, dtype=self.torch_dtype, **load_kwargs)
            except OSError as err:
                raise MissingWeightsError(missing_weights_message(model_id, "weights", err)) from err

        self.config = hf_config
        if self.family == "whisper":
            self._init_whisper(model.get_encoder(), normalize)
        else:
            self._init_wav2vec2_family(model, normalize, load_kwargs)
        _bake_parametrizations(self.model)
        self.model.eval()
        self.model.requires_grad_(False)
        self._recorder = BlockStateRecorder(self._blocks())
        self.num_layers = self._recorder.num_blocks + 1

    @classmethod
    def from_config_dict(
        cls,
        model_type: str,
        config: Mapping | None = None,
        seed: int = 0,
        randomize: bool = True,
        **kwargs,
    ) -> "HFUpstream":
        """A randomly initialised model built from an inline config (no hub access), e.g.
        ``HFUpstream.from_config_dict("wav2vec2", {"hidden_size": 32, ...}, seed=0)``.
        ``config={}`` gives the family's default (base-sized) architecture."""
        return cls(model_type=model_type, config=dict(config or {}), seed=seed, randomize=randomize, **kwargs)

    # --- construction per family -------------------------------------------------------------

    def _init_wav2vec2_family(self, model, normalize: bool | None, load_kwargs: dict) -> None:
        config = self.config
        self.model = model
        self.hidden_size = int(config.hidden_size)
        self.frame_rate = SAMPLE_RATE / math.prod(config.conv_stride)
        self.min_samples = receptive_field(config.conv_kernel, config.conv_stride)
        self.max_samples = None
        self.uses_attention_mask = config.feat_extract_norm == "layer"
        self.pad_invariant = self.uses_attention_mask
        if normalize is not None:
            self.normalize, self.normalize_source = bool(normalize), "argument"
            return
        if self.model_id is not None:
            try:
                extractor = cache_first(Wav2Vec2FeatureExtractor.from_pretrained, self.model_id, **load_kwargs)
                self.normalize, self.normalize_source = bool(extractor.do_normalize), "preprocessor_config"
                return
            except OSError:
                log.warning("%s has no preprocessor_config.json; normalize follows feat_extract_norm", self.model_id)
        self.normalize, self.normalize_source = self.uses_attention_mask, "feat_extract_norm"

    def _init_whisper(self, encoder, normalize: bool | None) -> None:
        if normalize:
            raise ValueError("normalize=true is not defined for Whisper (its log-mel front end has its own scaling)")
        self.model = encoder
        self.normalize, self.normalize_source = False, "whisper"
        self.hidden_size = int(self.config.d_model)
        extractor = whisper_frontend.feature_extractor_for(self.config)
        self.register_buffer("mel_filters", torch.from_numpy(extractor.mel_filters).float(), persistent=False)
        samples_per_frame = whisper_frontend.HOP_LENGTH * encoder.conv1.stride[0] * encoder.conv2.stride[0]
        self.frame_rate = SAMPLE_RATE / samples_per_frame
        self.min_samples = 1
        self.max_samples = whisper_frontend.WINDOW_SAMPLES
        self.uses_attention_mask = False
        self.pad_invariant = True  # each clip is padded to its own 30 s window

    def _blocks(self) -> torch.nn.ModuleList:
        return self.model.layers if self.family == "whisper" else self.model.encoder.layers

    # --- contract ------------------------------------------------------------------------------

    def train(self, mode: bool = True) -> "HFUpstream":
        """Always eval: dropout, LayerDrop and SpecAugment stay off (the contract)."""
        return super().train(False)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return forward_batch_invariant(
            self._forward_batch, wavs, lengths, pad_invariant=self.pad_invariant, min_samples=self.min_samples,
            max_samples=self.max_samples, upstream=self.name)

    def _forward_batch(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        width = int(lengths.max())
        wavs = zero_padding(wavs[:, :width].float(), lengths)
        if self.family == "whisper":
            features = whisper_frontend.log_mel_window(wavs, self.mel_filters).to(self.torch_dtype)
            with self._recorder.recording() as states:
                self.model(features)
            frame_lengths = whisper_frontend.encoder_frames(lengths)
            kept = int(frame_lengths.max())
            return [state[:, :kept].float() for state in states], frame_lengths
        if self.normalize:
            wavs = zero_mean_unit_variance(wavs, lengths)
        attention_mask = None
        if self.uses_attention_mask:
            attention_mask = (torch.arange(width, device=wavs.device)[None, :] < lengths[:, None]).long()
        with self._recorder.recording() as states:
            self.model(wavs.to(self.torch_dtype), attention_mask=attention_mask)
        frame_lengths = self._conv_frames(lengths)
        return [state.float() for state in states], frame_lengths

    def _conv_frames(self, lengths: torch.Tensor) -> torch.Tensor:
        """Valid frames from the conv feature encoder's length formula (an adapter, which runs after
        the blocks, is not counted)."""
        if getattr(self.config, "add_adapter", False):
            return self.model._get_feat_extract_output_lengths(lengths, add_adapter=False).long()
        return self.model._get_feat_extract_output_lengths(lengths).long()

    # --- identity ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.display_name or self.model_id or f"random-{self.family}"

    def fingerprint_fields(self) -> dict:
        fields = {
            "upstream": "hf",
            "model_id": self.model_id,
            "revision": self.revision,
            "resolved_commit": self.resolved_commit,
            "local_files": self._local_signature,
            "family": self.family,
            "config_sha256": self.config_sha256,
            "layer_convention": LAYER_CONVENTION,
            "dtype": self.dtype_name,
            "transformers": transformers.__version__,
            "randomize": self.randomize,
            "seed": self.seed if self.randomize else None,
            "normalize": self.normalize,
        }
        if self.family == "whisper":
            fields["whisper_frames"] = whisper_frontend.FRAME_TRIM
        return fields
