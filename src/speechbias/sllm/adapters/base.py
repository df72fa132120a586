"""The speech-LLM contract: prompts (+ optional audio) in, free-form text answers out.

An adapter's :meth:`SpeechLLM.generate` takes a batch of :class:`ChatInput` (prompt text and the
path of the spoken context, or ``None`` for the text-only ablation) and returns one decoded answer
per input, only the newly generated text. Adapters load through
:func:`speechbias.model_loading.load_pretrained` (the local cache first; ``HF_HUB_OFFLINE=1`` never
leaves it), which fails with :class:`~speechbias.model_loading.MissingWeightsError` naming the model id.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from speechbias.checked_settings import Settings, boolean, integer, number, setting
from speechbias.errors import ConfigError
from speechbias.model_loading import FingerprintedModel


@dataclass(frozen=True)
class ChatInput:
    """One request. ``audio_path``: the spoken context (None = text only). ``answer_key``: letter ->
    continuation kind; read only by scripted policies (:mod:`~speechbias.sllm.adapters.policy`), never
    by model adapters."""

    prompt: str
    audio_path: str | None = None
    answer_key: Mapping[str, str] | None = None


@dataclass(frozen=True)
class SamplingParams(Settings):
    """Decoding settings (``task.sampling.*``). The paper samples with temperature 1.0, top-p 0.9, top-k 100."""

    NODE = "task.sampling"

    do_sample: bool = setting(boolean(), True, "sample (else greedy)")
    temperature: float = setting(number(0), 1.0, "> 0 when sampling")
    top_p: float = setting(number(0, 1, low_open=True), 0.9, "nucleus sampling's mass")
    top_k: int = setting(integer(0), 100, "0 = no top-k")
    max_new_tokens: int = setting(integer(1), 64, "the longest answer in tokens")

    def __post_init__(self):
        super().__post_init__()
        if self.do_sample and not self.temperature > 0:
            raise ConfigError(
                f"task.sampling.temperature={self.temperature:g}: must be > 0 when sampling "
                "(or task.sampling.do_sample=false for greedy decoding)"
            )

    def generate_kwargs(self) -> dict:
        """Keyword arguments of ``transformers`` ``generate`` (greedy: no sampling knobs)."""
        if not self.do_sample:
            return {"do_sample": False, "max_new_tokens": self.max_new_tokens}
        return {
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_new_tokens": int(self.max_new_tokens),
        }

    def as_dict(self) -> dict:
        return asdict(self)


class SpeechLLM(FingerprintedModel, ABC):
    """A speech LLM answering prompts about audio. ``model_fingerprint`` and its digest ``fingerprint``
    as for upstreams and ASR models (the answer cache's signatures hash the fields themselves:
    :func:`speechbias.sllm.probe.request_signature`)."""

    #: short name used in result tables
    name: str

    @abstractmethod
    def fingerprint_fields(self) -> dict:
        """What produced the answers: model id, revision, dtype, library version (cache key material)."""

    @abstractmethod
    def generate(self, inputs: Sequence[ChatInput], sampling: SamplingParams) -> list[str]:
        """One decoded answer per input (generated text only)."""


def resolve_dtype(dtype: str = "auto", device: str = "cpu"):
    """``auto``: bfloat16 on CUDA, float32 on CPU; else a torch dtype name."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"dtype must be 'auto' or a torch dtype name (bfloat16, float16, float32), got {dtype!r}")
    return value
