"""Generic adapter for audio chat models in transformers whose processor has a chat template.

The conversation carries the waveform itself (``{"type": "audio", "audio": <float32 array>}``);
``processor.apply_chat_template(..., tokenize=True, return_dict=True)`` renders the model's own
audio placeholders and runs its feature extractor, so no model-specific code is needed here.
Meant for Qwen2-Audio, Qwen2.5-Omni (thinker), Voxtral, Granite Speech, Gemma 3n and the like;
``model_class`` picks the auto class (``AutoModelForMultimodalLM`` covers Qwen2-Audio, Voxtral,
Granite Speech, Qwen2.5-Omni; Gemma 3n is ``AutoModelForImageTextToText``) and ``generate_kwargs``
adds model-specific generate options (e.g. ``return_audio: false`` for Omni models).

What is tested: the whole path with a tiny random Qwen2-Audio saved to a local directory and loaded
through ``AutoProcessor`` + ``AutoModelForMultimodalLM``. The other families are not run in tests
(no weights offline); their processors' chat templates must accept audio arrays in content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hydra.utils import get_class

from speechbias.fileio.audio import SAMPLE_RATE, load_audio
from speechbias.model_loading import cached_commit, load_pretrained, resolve_device
from speechbias.sllm.adapters.base import ChatInput, SamplingParams, SpeechLLM, resolve_dtype


class ChatTemplateAudioLLM(SpeechLLM):
    def __init__(
        self,
        model_id: str,
        model_class: str = "transformers.AutoModelForMultimodalLM",
        processor_class: str = "transformers.AutoProcessor",
        revision: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        name: str | None = None,
        system_prompt: str | None = None,
        generate_kwargs: Mapping | None = None,
        model_kwargs: Mapping | None = None,
        model=None,
        processor=None,
    ):
        import torch

        if not model_id:
            raise ValueError(
                "model_id must name a hub id or a local directory (e.g. model_id=mistralai/Voxtral-Mini-3B-2507)"
            )
        self.model_id = str(model_id)
        self.name = name or self.model_id.rstrip("/").split("/")[-1]
        self.revision = revision
        self.system_prompt = system_prompt
        self.model_class = model_class
        self.generate_extra = dict(generate_kwargs or {})
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        if processor is None:
            processor = load_pretrained(
                get_class(processor_class).from_pretrained, self.model_id, revision, "processor"
            )
        if model is None:
            model = load_pretrained(
                get_class(model_class).from_pretrained,
                self.model_id,
                revision,
                "model",
                dtype=self.dtype,
                **dict(model_kwargs or {}),
            )
        self.processor = processor
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.padding_side = "left"
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        extractor = getattr(processor, "feature_extractor", None)
        self.sampling_rate = int(getattr(extractor, "sampling_rate", SAMPLE_RATE))
        self._torch = torch

    def fingerprint_fields(self) -> dict:
        import transformers

        return {
            "adapter": "chat_template",
            "model_id": self.model_id,
            "model_class": self.model_class,
            "revision": self.revision,
            "commit": cached_commit(self.model_id, self.revision),
            "dtype": str(self.dtype),
            "system_prompt": self.system_prompt,
            "transformers": transformers.__version__,
        }

    def conversation(self, inp: ChatInput) -> list[dict]:
        content = []
        if inp.audio_path is not None:
            content.append({"type": "audio", "audio": load_audio(inp.audio_path, sample_rate=self.sampling_rate)})
        content.append({"type": "text", "text": inp.prompt})
        system = (
            [{"role": "system", "content": [{"type": "text", "text": self.system_prompt}]}]
            if self.system_prompt
            else []
        )
        return system + [{"role": "user", "content": content}]

    def generate(self, inputs: Sequence[ChatInput], sampling: SamplingParams) -> list[str]:
        if not inputs:
            return []
        batch = self.processor.apply_chat_template(
            [self.conversation(i) for i in inputs],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
            padding=True,
        )
        batch = batch.to(self.device)
        for key, value in batch.items():
            if hasattr(value, "is_floating_point") and value.is_floating_point():
                batch[key] = value.to(self.dtype)
        with self._torch.inference_mode():
            out = self.model.generate(**batch, **sampling.generate_kwargs(), **self.generate_extra)
        if isinstance(out, tuple):  # omni models may return (text ids, audio)
            out = out[0]
        if not getattr(self.model.config, "is_encoder_decoder", False):
            out = out[:, batch["input_ids"].shape[1] :]
        return [t.strip() for t in self.processor.batch_decode(out, skip_special_tokens=True)]
