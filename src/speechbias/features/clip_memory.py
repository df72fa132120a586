"""The longest clip a run takes (``extraction.max_clip_seconds=auto``): the peak memory of one batch's forward
predicted from the upstream's config (no torch, no model built), against the memory the run has.

Extraction holds a whole clip in one forward (an attention model's chunks are not its whole-clip forward,
so clips are not split). Peak of a batch of ``B`` clips of ``t`` seconds (S = 16,000 t samples, T frames):

    PROCESS_BYTES + 4 x parameters + B x MARGIN x (audio + front end + states + attention)

* audio: :data:`AUDIO_BYTES_PER_SAMPLE` x S (the decoded clip and its tensor copies);
* front end: the first conv layer's output, channels x S / stride x 4 bytes, :data:`FRONT_COPIES` copies
  (:data:`LAYER_NORM_FRONT_COPIES` for a layer-norm front end); fbank/mfcc: FFT bins x frames x 4, 2 copies;
* states: every hidden state kept, (L + 1) x T x D x 4 bytes, and one block's q, k, v, output and
  feed-forward activations, T x (4 D + ffn) x 4;
* attention: WavLM (transformers' eager attention with its relative position bias) holds T x T matrices:
  T^2 x (:data:`ATTENTION_COPIES` x 4 x heads + :data:`POSITION_BUCKET_BYTES`); wav2vec2 and HuBERT run
  torch's scaled_dot_product_attention, whose memory measured linear in T (tiny_wav2vec2: 0.8 MB per
  second of audio at 5 to 600 s, where a T x T matrix would take 1.8 GB at 600 s); Whisper's window is
  always 30 s (T = 1500), counted with one layer's heads x T^2 x 4.

The constants were fitted to peak RSS measured on CPU (``python benchmarks/clip_memory_bench.py``: tiny
wav2vec2/HuBERT/WavLM, WavLM with 2 and 8 heads, the base-sized random wav2vec2, fbank; 5 to 300 s; and
whole evaluate.py runs with one clip of up to 1800 s) and :data:`MARGIN` keeps every prediction above its
measurement (the bench prints the ratios). The limit is the
longest whole second whose predicted peak fits in :data:`MEMORY_FRACTION` of the memory: the host's
(:func:`~speechbias.features.memory_size.host_memory_bytes`), a GPU's on a GPU run where nvidia-smi reads
it (else the host's), or ``extraction.memory_gib``; capped by what the model takes (Whisper's 30 s).
Batches are counted as ``B`` clips of the longest: the loader batches the longest clips together, and an
upstream that pads (fbank/mfcc, layer-norm front ends, Whisper) pads a batch to its longest clip. GPU peaks
were not measured (no GPU where this was written): the same model is applied to the GPU's memory, untested.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from speechbias.upstream.architecture import SAMPLE_RATE, Architecture, architecture_of

# the process without a clip: Python, torch, Lightning, transformers, Hydra (measured: a whole evaluate.py
# demo run peaks at 463 MiB with fbank, 516 MiB with tiny_wav2vec2; 1.5x that)
PROCESS_BYTES = 768 << 20
AUDIO_BYTES_PER_SAMPLE = 24  # the decoded clip and the float32 tensors made of it (measured ~22)
FRONT_COPIES = 2  # group-norm conv front end (measured ~2 on the base-sized wav2vec2)
LAYER_NORM_FRONT_COPIES = 4  # layer-norm conv front end: two more (measured ~3.9 on tiny_wav2vec2_stable)
ATTENTION_COPIES = 3  # WavLM: float32 T x T per head (measured 12.5 bytes per head)
POSITION_BUCKET_BYTES = 32  # WavLM: the relative position buckets, int64 T x T temporaries (measured ~27)
# predicted / measured (benchmarks/clip_memory_bench.py, 2 cores): one clip's growth 1.10 to 1.62, the
# extraction process's peak 1.28 to 1.71, whole evaluate.py runs in batches of 2 1.43 to 2.46
MARGIN = 1.25
MEMORY_FRACTION = 0.5  # of the memory, the rest left to everything else on the machine
GIB = 1 << 30


def linear_bytes_per_second(arch: Architecture) -> float:
    """The per-clip bytes that grow with the clip's length, per second of audio (before :data:`MARGIN`)."""
    frames = arch.frame_rate
    audio = AUDIO_BYTES_PER_SAMPLE * SAMPLE_RATE
    copies = LAYER_NORM_FRONT_COPIES if arch.layer_norm_front else FRONT_COPIES
    front = copies * arch.front_channels * SAMPLE_RATE / arch.front_stride * 4
    states = arch.states * frames * arch.width * 4
    block = frames * (4 * arch.width + arch.ffn) * 4 if arch.heads else 0.0  # fbank/mfcc: no blocks
    return audio + front + states + block


def quadratic_bytes_per_second2(arch: Architecture) -> float:
    """The per-clip bytes that grow with the square of the clip's length, per second^2 (before MARGIN)."""
    if arch.kind != "wavlm":
        return 0.0
    return arch.frame_rate**2 * (ATTENTION_COPIES * 4 * arch.heads + POSITION_BUCKET_BYTES)


def clip_bytes(arch: Architecture, seconds: float) -> float:
    """Predicted memory of one clip of ``seconds`` in a forward (with :data:`MARGIN`), bytes."""
    if arch.window_seconds is not None:  # Whisper: every clip is padded to its window
        seconds = arch.window_seconds
        frames = arch.frame_rate * seconds
        attention = arch.heads * frames**2 * 4
        return MARGIN * (linear_bytes_per_second(arch) * seconds + attention)
    return MARGIN * (linear_bytes_per_second(arch) * seconds + quadratic_bytes_per_second2(arch) * seconds**2)


def peak_bytes(arch: Architecture, seconds: float, batch: int = 1) -> float:
    """Predicted peak memory of extracting a batch of ``batch`` clips of ``seconds``, bytes."""
    return PROCESS_BYTES + 4 * arch.parameters + batch * clip_bytes(arch, seconds)


def longest_clip_seconds(arch: Architecture, memory_bytes: float, batch: int = 1) -> int:
    """The longest whole number of seconds whose :func:`peak_bytes` fits in :data:`MEMORY_FRACTION` of
    ``memory_bytes`` (0 when not even an empty clip fits), capped by the model's window."""
    budget = (MEMORY_FRACTION * memory_bytes - PROCESS_BYTES - 4 * arch.parameters) / batch
    if budget <= 0:
        return 0
    if arch.window_seconds is not None:
        return int(arch.window_seconds) if clip_bytes(arch, arch.window_seconds) <= budget else 0
    a = MARGIN * quadratic_bytes_per_second2(arch)
    b = MARGIN * linear_bytes_per_second(arch)
    seconds = budget / b if a == 0 else (-b + math.sqrt(b * b + 4 * a * budget)) / (2 * a)
    whole = math.floor(seconds)
    while whole > 0 and peak_bytes(arch, whole, batch) > MEMORY_FRACTION * memory_bytes:
        whole -= 1  # floating point at the boundary
    return whole


@dataclass(frozen=True)
class ClipLimit:
    """The auto limit of a run: ``seconds``, and what it was derived from (for the refusal line)."""

    seconds: int
    upstream: str
    memory_bytes: int
    memory_source: str
    batch: int
    window_seconds: float | None = None

    @property
    def text(self) -> str:
        """``the limit of N s for upstream=X with M GiB (...)``, as a refusal line says it."""
        if self.window_seconds is not None and self.seconds == int(self.window_seconds):
            basis = f"(its {self.window_seconds:g} s window)"
        else:
            share = f"{MEMORY_FRACTION:.0%} of it for batches of {self.batch}"
            if self.seconds == 0:
                share = f"{MEMORY_FRACTION:.0%} of it does not hold the process and the model's weights"
            basis = f"with {self.memory_bytes / GIB:.3g} GiB ({self.memory_source}; {share})"
        return (
            f"the limit of {self.seconds} s for upstream={self.upstream} {basis} "
            "(extraction.max_clip_seconds=auto; set a number to override)"
        )


def run_memory(cfg: DictConfig) -> tuple[int, str]:
    """(bytes, where they come from) of the memory a run's extraction has: ``extraction.memory_gib``, else
    a GPU's on a GPU run (when nvidia-smi reads it), else the host's."""
    from speechbias.features import memory_size

    given = OmegaConf.select(cfg, "extraction.memory_gib", default=None)
    if given is not None:
        return int(float(given) * GIB), "extraction.memory_gib"
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="cpu") or "cpu")
    if accelerator in ("gpu", "cuda", "auto"):
        gpu = memory_size.gpu_memory_bytes()
        if gpu is not None:
            return gpu, "the GPU's"
    return memory_size.host_memory_bytes(), "the host's"


def upstream_name(cfg: DictConfig) -> str:
    """The upstream as the user chose it (``upstream=<name>``), else its display name or hub id."""
    chosen = OmegaConf.select(cfg, "hydra.runtime.choices.upstream", default=None)
    if chosen:
        return str(chosen)
    upstream = OmegaConf.select(cfg, "upstream", default=None)
    for key in ("display_name", "model_id", "name"):
        value = OmegaConf.select(upstream, key, default=None) if upstream is not None else None
        if value:
            return str(value)
    return "?"


def clip_limit(cfg: DictConfig) -> ClipLimit:
    """The auto limit of the run of ``cfg`` (its upstream, ``extraction.batch_size``, its memory)."""
    arch = architecture_of(OmegaConf.select(cfg, "upstream", default=None))
    memory, source = run_memory(cfg)
    batch = int(OmegaConf.select(cfg, "extraction.batch_size", default=1) or 1)
    return ClipLimit(
        seconds=longest_clip_seconds(arch, memory, batch),
        upstream=upstream_name(cfg),
        memory_bytes=memory,
        memory_source=source,
        batch=batch,
        window_seconds=arch.window_seconds,
    )


# the keys of a run config that its clip limit is computed from (the host's or GPU's memory aside)
CLIP_LIMIT_KEYS = (
    "extraction.max_clip_seconds",
    "extraction.memory_gib",
    "extraction.batch_size",
    "trainer.accelerator",
    "hydra.runtime.choices.upstream",
    "upstream",
)
# clip_length_limit's answers by the values of CLIP_LIMIT_KEYS: the two resolvers of one config, and the
# pre-run check of each bias test, ask for the same limit (an auto one reads the memory: nvidia-smi on a GPU run)
_limits: dict[str, tuple[float | None, str | None]] = {}


def clip_limit_key(cfg: DictConfig) -> str:
    """The values of :data:`CLIP_LIMIT_KEYS` in ``cfg`` (resolved), as JSON text."""
    values = [OmegaConf.select(cfg, key, default=None) for key in CLIP_LIMIT_KEYS]
    plain = [OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for v in values]
    return json.dumps(plain, sort_keys=True, default=str)


def clip_length_limit(cfg: DictConfig) -> tuple[float | None, str | None]:
    """(longest clip in seconds, how a refusal names that limit) of the run config's
    ``extraction.max_clip_seconds``: a number as given (None: the line names the setting); ``auto``
    :func:`clip_limit`; (None, None) when the config has none. The pre-run clip check and a manifest built
    during the run (``${speechbias.clip_limit_seconds:}`` in the tasks' ``clip_check``) both read it;
    computed once per :func:`clip_limit_key` in a process (the memory is read once)."""
    try:
        key = clip_limit_key(cfg)
    except OmegaConfBaseException:  # a value that does not resolve: computed unmemoised (and named there)
        return _clip_length_limit(cfg)
    if key not in _limits:
        if len(_limits) >= 16:
            _limits.pop(next(iter(_limits)))
        _limits[key] = _clip_length_limit(cfg)
    return _limits[key]


def _clip_length_limit(cfg: DictConfig) -> tuple[float | None, str | None]:
    value = OmegaConf.select(cfg, "extraction.max_clip_seconds", default=None)
    if value is None:
        return None, None
    if value != "auto":
        return float(value), None
    limit = clip_limit(cfg)
    return float(limit.seconds), limit.text
