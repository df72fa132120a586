"""The speech-LLM contract: prompts (+ optional audio) in, free-form text answers out.

An adapter's :meth:`SpeechLLM.generate` takes a batch of :class:`ChatInput` (prompt text and the
path of the spoken context, or ``None`` for the text-only ablation) and returns one decoded answer
per input, only the newly generated text. Loading from the hub honours ``HF_HUB_OFFLINE=1``
(``local_files_only``) and fails with :class:`ModelUnavailableError` naming the model id.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass


class ModelUnavailableError(RuntimeError):
    """Weights/processor of a model cannot be loaded; the message names the model id and the fix."""


@dataclass(frozen=True)
class ChatInput:
    """One request. ``audio_path``: the spoken context (None = text only). ``answer_key``: letter ->
    continuation kind; read only by scripted policies (:mod:`~speechbias.sllm.adapters.policy`), never
    by model adapters."""

    prompt: str
    audio_path: str | None = None
    answer_key: Mapping[str, str] | None = None


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. The paper samples with temperature 1.0, top-p 0.9, top-k 100."""

    do_sample: bool = True
    temperature: float = 1.0
    top_p: float = 0.9
    top_k: int = 100
    max_new_tokens: int = 64

    def __post_init__(self):
        if self.do_sample and not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if int(self.top_k) < 0 or int(self.max_new_tokens) < 1:
            raise ValueError(f"top_k must be >= 0 and max_new_tokens >= 1, got {self.top_k}, {self.max_new_tokens}")

    def generate_kwargs(self) -> dict:
        """Keyword arguments of ``transformers`` ``generate`` (greedy: no sampling knobs)."""
        if not self.do_sample:
            return {"do_sample": False, "max_new_tokens": int(self.max_new_tokens)}
        return {"do_sample": True, "temperature": float(self.temperature), "top_p": float(self.top_p),
                "top_k": int(self.top_k), "max_new_tokens": int(self.max_new_tokens)}

    def as_dict(self) -> dict:
        return asdict(self)


class SpeechLLM(ABC):
    """A speech LLM answering prompts about audio."""

    #: short name used in result tables
    name: str

    @property
    @abstractmethod
    def fingerprint(self) -> dict:
        """What produced the answers: model id, revision, dtype, library version (cache key material)."""

    @abstractmethod
    def generate(self, inputs: Sequence[ChatInput], sampling: SamplingParams) -> list[str]:
        """One decoded answer per input (generated text only)."""


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def load_pretrained(loader: Callable, model_id: str, revision: str | None = None, what: str = "model", **kwargs):
    """``loader(model_id, revision=..., local_files_only=HF_HUB_OFFLINE, **kwargs)`` with a clear error."""
    offline = hub_offline()
    try:
        return loader(model_id, revision=revision, local_files_only=offline, **kwargs)
    except (OSError, ValueError) as exc:
        where = "in the local Hugging Face cache (HF_HUB_OFFLINE=1)" if offline else "locally or on the hub"
        raise ModelUnavailableError(
            f"cannot load the {what} of {model_id!r}{f' at revision {revision}' if revision else ''} {where}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. Make it available with "
            f"`huggingface-cli download {model_id}` on a machine with network (then point HF_HOME at that cache), "
            "or pass a local directory as model_id."
        ) from exc


def resolve_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: str = "auto", device: str = "cpu"):
    """``auto``: bfloat16 on CUDA, float32 on CPU; else a torch dtype name."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    value = getattr(torch, str(dtype), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"dtype must be 'auto' or a torch dtype name (bfloat16, float16, float32), got {dtype!r}")
    return value
