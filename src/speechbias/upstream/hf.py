"""Hugging Face speech encoders (wav2vec2, HuBERT, WavLM, Whisper) behind the Upstream contract.

This module holds what every family shares: loading (:func:`speechbias.model_loading.load_pretrained`,
real hub ids or a local directory, or a seeded random init), eval mode, the block recording, batch
invariance and the fingerprint. The upstream is lazy: construction reads the config (and checks that
the weights can be had, reading none), which gives the shape and the fingerprint; the model is built
and its weights loaded at the first forward (or the first access to ``model``), so a run whose
clips are all cached builds no model. What differs per family (input features, normalisation, valid
frames, which modules are the blocks, clip-length limits) is in its adapter under
:mod:`speechbias.upstream.families`: ``wav2vec2_like`` (wav2vec2, HuBERT, WavLM) and
``whisper_encoder``.

Layers follow ``block-io-v1`` (see :mod:`speechbias.upstream.block_states`): layer 0 is the input to
the first transformer block, layer l the output of block l as emitted, no final LayerNorm; so
``num_layers = n_blocks + 1`` (13 for base models, 25 for large, 49 for HuBERT XL; Whisper base 7,
small 13, medium 25, large 33).
"""

from __future__ import annotations

import contextlib
import functools
import warnings

from collections.abc import Mapping

import torch
import transformers
from transformers import PretrainedConfig

from speechbias.library_internals.torch import drop_weight_norm_compat_hooks
from speechbias.library_internals.transformers import init_module_weights
from speechbias.model_loading import RANDOM_CONTROL_FILES, check_weights_available, load_pretrained
from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import forward_batch_invariant, zero_padding
from speechbias.upstream.block_states import LAYER_CONVENTION, BlockStateRecorder
from speechbias.upstream.families import FAMILIES
from speechbias.upstream.hf_identity import hf_fingerprint_fields, hf_upstream_name
from speechbias.upstream.randomize import bake_parametrized_weights, init_parametrized_weights

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _plain(value):
    """A config value (possibly an OmegaConf node) as plain JSON-able Python."""
    if isinstance(value, Mapping) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    return value


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

    The upstream is frozen, so the computation is unchanged; without parametrizations (and the
    key-renaming hook weight norm leaves behind) the module pickles, which ``ddp_spawn`` (the strategy
    for DDP inside Hydra multiruns) needs.
    """
    bake_parametrized_weights(model)
    drop_weight_norm_compat_hooks(model)


def half_precision_cpu_guard(dtype: torch.dtype, device: torch.device):
    """A context that turns oneDNN off for a bfloat16/float16 forward on the CPU (no-op otherwise).

    oneDNN's bfloat16 grouped convolution (wav2vec2's positional convolution has 16 groups) is wrong on
    CPUs with AMX/AVX512-BF16: measured with torch 2.13.0 on a Xeon with amx_bf16, a 4-group Conv1d in
    bfloat16 was 110 % off float32 (ATen's own kernel: 0.3 %), and tiny wav2vec2 states 25 % off
    (1.4 % without oneDNN). ATen's kernels are slower but right; float32 keeps oneDNN.
    """
    if dtype == torch.float32 or device.type != "cpu":
        return contextlib.nullcontext()
    return _aten_kernels()


@contextlib.contextmanager
def _aten_kernels():
    # torch's flags() also re-sets oneDNN's TF32 switch, which warns on every call that TF32 needs an
    # Intel GPU; that warning is about a setting we leave as it was
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN", category=UserWarning)
        with torch.backends.mkldnn.flags(enabled=False):
            yield


class HFUpstream(Upstream):
    """A transformers speech encoder; see the module docstring and the family adapters for conventions.

    Args:
        model_id: hub id (e.g. ``facebook/hubert-large-ll60k``) or a local model directory.
        revision: hub branch, tag or commit (None = the default branch).
        family: expected family (wav2vec2|hubert|wavlm|whisper); checked against the config.
        randomize: build the architecture from its config with a seeded random init instead of
            loading weights (random-network control; needs only config.json).
        seed: seed of the random init (used when randomize or for config-dict models).
        dtype: float32 | float16 | bfloat16 compute dtype; states are returned as float32.
        normalize: per-clip zero-mean unit-variance of the waveform (wav2vec2 family). None = the
            family's default (see :mod:`speechbias.upstream.families.wav2vec2_like`).
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
        load_kwargs = {"revision": revision, "cache_dir": cache_dir}

        if config is not None:
            if not self.randomize:
                raise ValueError("a config-dict model has no pre-trained weights: randomize must be true")
            if model_type not in FAMILIES:
                raise ValueError(f"model_type '{model_type}' is not one of {', '.join(FAMILIES)}")
            config_dict = _plain(config)
            hf_config = FAMILIES[model_type].model_classes[model_type][0](**config_dict)
        else:
            hf_config = load_pretrained(
                transformers.AutoConfig.from_pretrained,
                model_id,
                what="config",
                only_files=RANDOM_CONTROL_FILES if self.randomize else (),
                **load_kwargs,
            )
            config_dict = None
        self.family = _family_of(hf_config, family, source)
        # from the arguments and the files, as a config gives it before any build (hf_identity)
        self._fingerprint_fields = hf_fingerprint_fields(
            model_id, revision, family, randomize, seed, dtype, normalize, layer_convention, display_name, cache_dir,
            model_type=model_type, config=config_dict,
        )  # fmt: skip
        if self._fingerprint_fields is None:  # the files moved between the load and this read
            raise RuntimeError(f"{source}: its config.json cannot be read again (did its files change?)")
        if not self.randomize:
            check_weights_available(model_id, revision=revision, cache_dir=cache_dir)
        self._load_kwargs = load_kwargs

        self.config = hf_config
        self.family_adapter = FAMILIES[self.family](hf_config, normalize, model_id=model_id, load_kwargs=load_kwargs)
        for name in (
            "hidden_size",
            "frame_rate",
            "min_samples",
            "max_samples",
            "pad_invariant",
            "normalize",
            "normalize_source",
        ):
            setattr(self, name, getattr(self.family_adapter, name))
        self.num_layers = self.family_adapter.num_blocks(hf_config) + 1
        # Moves with .to()/.cuda(), so a model built later lands where the upstream was sent.
        self.register_buffer("_device_probe", torch.empty(0), persistent=False)
        self._recorder: BlockStateRecorder | None = None

    # --- the model, built on first use -----------------------------------------------------------

    @property
    def is_built(self) -> bool:
        """Whether the model has been built (weights loaded); False until the first forward."""
        return "model" in dict(self.named_children())

    @property
    def model(self) -> torch.nn.Module:
        """The encoder, built (weights loaded, or seeded random init) on first access."""
        if not self.is_built:
            self._build()
        return dict(self.named_children())["model"]

    def _build(self) -> None:
        adapter_cls = FAMILIES[self.family]
        model_cls = adapter_cls.model_classes[self.family][1]
        if self.randomize:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                model = model_cls(self.config)
                # transformers' init misses weight-normed weights: drawn again once baked
                init_parametrized_weights(model, functools.partial(init_module_weights, model))
            model = model.to(self.torch_dtype)
        else:
            model = load_pretrained(
                model_cls.from_pretrained, self.model_id, what="weights", dtype=self.torch_dtype, **self._load_kwargs
            )
        encoder = adapter_cls.encoder_of(model)
        self.family_adapter.check_encoder(encoder)
        _bake_parametrizations(encoder)
        encoder.eval()
        encoder.requires_grad_(False)
        recorder = BlockStateRecorder(self.family_adapter.blocks(encoder))
        if recorder.num_blocks + 1 != self.num_layers:
            raise RuntimeError(
                f"{self.name}: the built encoder has {recorder.num_blocks} blocks, its config {self.num_layers - 1}"
            )
        # nn.Module.__setattr__ registers a module value as the child "model" without reading the class's
        # ``model`` property (add_module's name check would read it, which builds)
        self.model = encoder.to(self._device_probe.device)
        self._recorder = recorder

    @classmethod
    def from_config_dict(
        cls,
        model_type: str,
        config: Mapping | None = None,
        seed: int = 0,
        randomize: bool = True,
        **kwargs,
    ) -> HFUpstream:
        """A randomly initialised model built from an inline config (no hub access), e.g.
        ``HFUpstream.from_config_dict("wav2vec2", {"hidden_size": 32, ...}, seed=0)``.
        ``config={}`` gives the family's default (base-sized) architecture."""
        return cls(model_type=model_type, config=dict(config or {}), seed=seed, randomize=randomize, **kwargs)

    # --- contract ------------------------------------------------------------------------------

    def train(self, mode: bool = True) -> HFUpstream:
        """Always eval: dropout, LayerDrop and SpecAugment stay off (the contract)."""
        return super().train(False)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return forward_batch_invariant(
            self._forward_batch,
            wavs,
            lengths,
            pad_invariant=self.pad_invariant,
            min_samples=self.min_samples,
            max_samples=self.max_samples,
            upstream=self.name,
        )

    def _forward_batch(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """One padded batch: the family's encoder inputs -> recorded block states, cut to the longest
        clip's valid frames, as float32."""
        wavs = zero_padding(wavs[:, : int(lengths.max())].float(), lengths)
        inputs = self.family_adapter.encoder_inputs(wavs, lengths, self.torch_dtype)
        model = self.model  # built here on the first forward
        with half_precision_cpu_guard(self.torch_dtype, wavs.device), self._recorder.recording() as states:
            model(**inputs)
        frame_lengths = self.family_adapter.frame_lengths(lengths)
        kept = int(frame_lengths.max())
        return [state[:, :kept].float() for state in states], frame_lengths

    # --- identity ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return hf_upstream_name(self.display_name, self.model_id, self.family)

    def fingerprint_fields(self) -> dict:
        """:func:`speechbias.upstream.hf_identity.hf_fingerprint_fields` of the constructor's arguments."""
        return dict(self._fingerprint_fields)
