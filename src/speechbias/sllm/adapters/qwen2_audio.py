"""Qwen2-Audio (``Qwen/Qwen2-Audio-7B-Instruct``) through transformers.

``Qwen2AudioForConditionalGeneration`` + ``Qwen2AudioProcessor``: the chat template renders an
audio placeholder (``Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>``) before the prompt; the
processor (transformers 5.x keyword ``audio=``) turns waveforms into Whisper log-mel features and
expands the placeholder to one token per encoder frame. Batches are left-padded so every answer
starts right after its own prompt; only the generated tokens are decoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from speechbias.fileio.audio import load_audio
from speechbias.sllm.adapters.base import ChatInput, SamplingParams
from speechbias.sllm.adapters.chat_template import ChatTemplateAudioLLM


class Qwen2AudioAdapter(ChatTemplateAudioLLM):
    """``model``/``processor`` may be passed already built (tests, custom loading); otherwise they are
    loaded from ``model_id`` (hub id or local directory). Loads as a chat-template audio LLM does; its
    own conversation (an audio placeholder, the waveforms given to the processor) and generate."""

    def __init__(
        self,
        model_id: str = "Qwen/Qwen2-Audio-7B-Instruct",
        revision: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        name: str = "qwen2_audio",
        system_prompt: str | None = None,
        model=None,
        processor=None,
    ):
        super().__init__(
            str(model_id),  # null -> "None": load_pretrained's one-line error, not the generic adapter's ValueError
            "transformers.Qwen2AudioForConditionalGeneration",
            "transformers.Qwen2AudioProcessor",
            revision,
            dtype,
            device,
            name,
            system_prompt,
            model=model,
            processor=processor,
        )

    def fingerprint_fields(self) -> dict:
        fields = super().fingerprint_fields()
        fields["adapter"] = "qwen2_audio"
        del fields["model_class"]  # one class: the adapter names it
        return fields

    def conversation(self, inp: ChatInput) -> list[dict]:
        content = [{"type": "audio", "audio_url": "context.wav"}] if inp.audio_path is not None else []
        content.append({"type": "text", "text": inp.prompt})
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [{"role": "user", "content": content}]

    def generate(self, inputs: Sequence[ChatInput], sampling: SamplingParams) -> list[str]:
        if not inputs:
            return []
        texts = [
            self.processor.apply_chat_template(self.conversation(inp), add_generation_prompt=True, tokenize=False)
            for inp in inputs
        ]
        audios = [
            load_audio(inp.audio_path, sample_rate=self.sampling_rate) for inp in inputs if inp.audio_path is not None
        ]
        kwargs = {"audio": audios, "sampling_rate": self.sampling_rate} if audios else {}
        batch = self.processor(text=texts, return_tensors="pt", padding=True, **kwargs)
        batch = batch.to(self.device)
        if "input_features" in batch:
            batch["input_features"] = batch["input_features"].to(self.dtype)
        tok = self.processor.tokenizer
        with self._torch.inference_mode():
            out = self.model.generate(
                **batch,
                **sampling.generate_kwargs(),
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        new_tokens = out[:, batch["input_ids"].shape[1] :]
        return [
            t.strip()
            for t in self.processor.batch_decode(
                new_tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        ]
