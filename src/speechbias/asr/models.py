"""ASR models through transformers: Whisper (seq2seq generation) and wav2vec2/HuBERT CTC.

A transcriber turns 16 kHz float32 mono waveforms into text. Models are loaded lazily (only when
something has to be transcribed), from their real hub ids or a local folder, through
:func:`speechbias.model_loading.load_pretrained` (the local cache first; with ``HF_HUB_OFFLINE=1``
only local files): a missing model raises :class:`~speechbias.model_loading.MissingWeightsError`
naming the model id and how to make it available.

``fingerprint`` identifies everything that determines the output text (model id, revision,
weights hash for local folders, decoding settings, dtype); it namespaces the hypothesis cache.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.model_loading import (
    HF_WEIGHT_FILES,
    FingerprintedModel,
    MissingWeightsError,
    load_pretrained,
    local_weights_digest,
    resolve_device,
)

log = logging.getLogger(__name__)

WHISPER_WINDOW_SAMPLES = 30 * SAMPLE_RATE


# what a local checkpoint folder needs for ASR: (what, any one of these file sets)
COMMON_FILES = {
    "config": (("config.json",),),
    "weights": tuple((name,) for name in HF_WEIGHT_FILES),
    "feature extractor": (("preprocessor_config.json",), ("processor_config.json",)),
}
# generation_config.json keys Whisper's generate() needs for language/task (else "generation config is outdated")
WHISPER_GENERATION_KEYS = ("lang_to_id", "task_to_id", "no_timestamps_token_id")


def missing_checkpoint_files(
    folder: Path, needs: dict[str, tuple[tuple[str, ...], ...]], generation_keys: tuple[str, ...] = ()
) -> list[str]:
    """The files (and generation_config.json keys) a local ASR checkpoint lacks, each as "what (file or
    file + file)"; empty when complete. ``needs``: what -> alternative file sets, besides COMMON_FILES."""
    missing = [
        f"{what} ({' or '.join(' + '.join(files) for files in alternatives)})"
        for what, alternatives in {**COMMON_FILES, **needs}.items()
        if not any(all((folder / f).is_file() for f in files) for files in alternatives)
    ]
    if generation_keys:
        path = folder / "generation_config.json"
        if not path.is_file():
            missing.append(f"generation_config.json (with {', '.join(generation_keys)})")
        else:
            try:
                have = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                have = {}
            lacking = [k for k in generation_keys if k not in have]
            if lacking:
                missing.append(f"{', '.join(lacking)} in generation_config.json (an outdated generation config)")
    return missing


class Transcriber(FingerprintedModel, ABC):
    """Waveforms in, text out. Subclasses name their transformers ``classes`` and decode in
    :meth:`_transcribe_batch`."""

    family: str = ""
    #: files a local checkpoint folder needs besides config, weights and feature extractor
    needs: dict[str, tuple[tuple[str, ...], ...]] = {}
    generation_keys: tuple[str, ...] = ()
    base_model_hint: str = ""
    #: the transformers classes (processor, model) that load the checkpoint
    classes: tuple[str, str]

    def __init__(
        self,
        model_id: str,
        revision: str | None = None,
        name: str | None = None,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "float32",
    ):
        if not model_id:
            raise ValueError("model_id is empty: give a hub id (e.g. openai/whisper-small) or a local folder")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_id = str(model_id)
        self.revision = revision
        self.name = name or Path(self.model_id).name
        self.batch_size = int(batch_size)
        self.device_request = device
        self.dtype_name = dtype
        self._model = None
        self._processor = None
        self._weights_digest = None

    # -- identity -------------------------------------------------------------------------
    def decoding_fields(self) -> dict:
        return {}

    def fingerprint_fields(self) -> dict:
        fields = {
            "family": self.family,
            "model_id": self.model_id,
            "revision": self.revision,
            "dtype": self.dtype_name,
            **self.decoding_fields(),
        }
        local = Path(self.model_id)
        if local.is_dir():
            if self._weights_digest is None:
                self._weights_digest = local_weights_digest(local, contents=True)
            fields["model_id"] = "local"
            fields["weights_sha256"] = self._weights_digest
        return fields

    # -- loading --------------------------------------------------------------------------

    def check_local_checkpoint(self) -> None:
        """For a local folder: MissingWeightsError naming every file ASR needs that it lacks (a fine-tuned
        checkpoint saved without its tokenizer or generation config fails deep inside transformers, or
        decodes to nothing, otherwise). Hub ids are resolved by :func:`load_pretrained`."""
        folder = Path(self.model_id).expanduser()
        if not folder.is_dir():
            return
        missing = missing_checkpoint_files(folder, self.needs, self.generation_keys)
        if missing:
            raise MissingWeightsError(
                f"model_id {self.model_id}: the local {self.family} checkpoint lacks what ASR needs: "
                f"{'; '.join(missing)}. Copy them from the model it was fine-tuned from{self.base_model_hint} "
                f"into that folder, or save them with the processor (processor.save_pretrained)"
            )

    def load(self) -> None:
        if self._model is None:
            self.check_local_checkpoint()
            import torch
            import transformers

            self.device = resolve_device(self.device_request)
            processor_class, model_class = (getattr(transformers, name) for name in self.classes)
            self._processor = load_pretrained(
                processor_class.from_pretrained, self.model_id, self.revision, "processor"
            )
            self._model = load_pretrained(
                model_class.from_pretrained,
                self.model_id,
                self.revision,
                "model",
                dtype=getattr(torch, self.dtype_name),
            )
            self._model.to(self.device).eval()

    @abstractmethod
    def _transcribe_batch(self, wavs: list[np.ndarray]) -> list[str]: ...

    def transcribe(self, wavs: list[np.ndarray]) -> list[str]:
        """Transcribe 16 kHz mono float32 waveforms; one string per input, in order."""
        if not wavs:
            return []
        self.load()
        import torch

        with torch.inference_mode():
            return self._transcribe_batch(list(wavs))


class WhisperTranscriber(Transcriber):
    """Whisper via ``WhisperForConditionalGeneration.generate``: English, transcribe, greedy by default.

    Clips up to 30 s are decoded in batches (Whisper pads every clip to its 30 s window, so batching
    does not change a clip's output). Longer clips use transformers' sequential long-form decoding
    (timestamps, one clip at a time).
    """

    family = "whisper"
    classes = ("WhisperProcessor", "WhisperForConditionalGeneration")
    needs = {"tokenizer": (("tokenizer.json",), ("vocab.json", "merges.txt"))}
    generation_keys = WHISPER_GENERATION_KEYS
    base_model_hint = (
        " (e.g. `huggingface-cli download openai/whisper-small generation_config.json "
        "tokenizer.json tokenizer_config.json --local-dir <folder>`)"
    )

    def __init__(
        self,
        model_id: str = "openai/whisper-small",
        revision: str | None = None,
        name: str | None = None,
        language: str = "en",
        task: str = "transcribe",
        num_beams: int = 1,
        max_new_tokens: int | None = None,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "float32",
    ):
        super().__init__(model_id, revision, name, batch_size, device, dtype)
        if int(num_beams) < 1:
            raise ValueError(f"num_beams must be >= 1, got {num_beams}")
        self.language, self.task = language, task
        self.num_beams = int(num_beams)
        self.max_new_tokens = None if max_new_tokens is None else int(max_new_tokens)

    def decoding_fields(self) -> dict:
        return {
            "language": self.language,
            "task": self.task,
            "num_beams": self.num_beams,
            "max_new_tokens": self.max_new_tokens,
            "long_form": "sequential-timestamps",
        }

    def _generate(self, features, attention_mask=None, long_form=False):
        kwargs = dict(language=self.language, task=self.task, num_beams=self.num_beams, return_dict_in_generate=True)
        if self.max_new_tokens is not None:
            kwargs["max_new_tokens"] = self.max_new_tokens
        if long_form:
            kwargs.update(return_timestamps=True, attention_mask=attention_mask, condition_on_prev_tokens=False)
        out = self._model.generate(features, **kwargs)
        seqs = out["sequences"] if isinstance(out, dict) else out.sequences
        return [t.strip() for t in self._processor.batch_decode(seqs, skip_special_tokens=True)]

    def _transcribe_batch(self, wavs):
        dtype = next(self._model.parameters()).dtype
        out: list[str | None] = [None] * len(wavs)
        short = [i for i, w in enumerate(wavs) if w.shape[0] <= WHISPER_WINDOW_SAMPLES]
        for start in range(0, len(short), self.batch_size):
            idx = short[start : start + self.batch_size]
            feats = self._processor([wavs[i] for i in idx], sampling_rate=SAMPLE_RATE, return_tensors="pt")
            texts = self._generate(feats.input_features.to(self.device, dtype))
            for i, t in zip(idx, texts):
                out[i] = t
        for i, w in enumerate(wavs):
            if out[i] is None:
                feats = self._processor(
                    [w],
                    sampling_rate=SAMPLE_RATE,
                    return_tensors="pt",
                    truncation=False,
                    padding="longest",
                    return_attention_mask=True,
                )
                out[i] = self._generate(
                    feats.input_features.to(self.device, dtype), feats.attention_mask.to(self.device), long_form=True
                )[0]
        return out


def ctc_frames(config, lengths):
    """Logit frames of a wav2vec2-family CTC model for inputs of ``lengths`` samples: the conv feature
    encoder's length formula, then the adapter's stride-only convolutions when the model has one."""
    from speechbias.upstream.families.wav2vec2_like import conv_frames

    frames = conv_frames(lengths, config.conv_kernel, config.conv_stride)
    if getattr(config, "add_adapter", False):
        layers = int(config.num_adapter_layers)
        frames = conv_frames(frames, [1] * layers, [config.adapter_stride] * layers)
    return frames


class CTCTranscriber(Transcriber):
    """wav2vec2 / HuBERT CTC models (``AutoModelForCTC``) with greedy CTC decoding.

    Models with a group-norm feature encoder or without an attention mask (e.g.
    facebook/wav2vec2-base-960h) are not invariant to zero padding: they are run one clip at a time.
    """

    family = "ctc"
    classes = ("AutoProcessor", "AutoModelForCTC")
    needs = {"tokenizer": (("vocab.json",), ("tokenizer.json",))}
    base_model_hint = " (e.g. facebook/wav2vec2-base-960h's vocab.json and tokenizer_config.json)"

    def decoding_fields(self) -> dict:
        return {"decoding": "greedy-ctc"}

    @property
    def pad_invariant(self) -> bool:
        self.load()
        fe = getattr(self._processor, "feature_extractor", self._processor)
        return getattr(self._model.config, "feat_extract_norm", "layer") == "layer" and bool(
            getattr(fe, "return_attention_mask", False)
        )

    def _transcribe_batch(self, wavs):
        import torch

        dtype = next(self._model.parameters()).dtype
        step = self.batch_size if self.pad_invariant else 1
        out: list[str] = []
        for start in range(0, len(wavs), step):
            chunk = wavs[start : start + step]
            inputs = self._processor(
                chunk, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True, return_attention_mask=step > 1
            )
            kwargs = {}
            if step > 1:
                kwargs["attention_mask"] = inputs.attention_mask.to(self.device)
            logits = self._model(inputs.input_values.to(self.device, dtype), **kwargs).logits
            ids = torch.argmax(logits, dim=-1).cpu()
            if step > 1:
                # frames past each clip's end are padding: blank them out before decoding
                frames = ctc_frames(self._model.config, inputs.attention_mask.sum(-1)).cpu()
                pad_id = self._processor.tokenizer.pad_token_id
                mask = torch.arange(ids.shape[1])[None, :] >= frames[:, None]
                ids = ids.masked_fill(mask, pad_id)
            out.extend(t.strip() for t in self._processor.batch_decode(ids))
        return out


def tiny_random_whisper(cache_dir: str | Path, seed: int = 0, demo: bool = True, **kwargs) -> WhisperTranscriber:
    """A WhisperTranscriber over a tiny random Whisper saved under ``cache_dir`` (tests, demos).
    ``demo``: the config's mark that a run with this model carries the demo caveat (read by the task
    config as ``asr.demo``; the model ignores it)."""
    from speechbias.asr.tiny_models import build_tiny_whisper

    folder = build_tiny_whisper(Path(cache_dir) / "tiny_models" / f"whisper_seed{seed}", seed=seed)
    kwargs.setdefault("name", "tiny_random_whisper")
    return WhisperTranscriber(model_id=str(folder), **kwargs)


def tiny_random_ctc(
    cache_dir: str | Path, family: str = "wav2vec2", seed: int = 0, demo: bool = True, **kwargs
) -> CTCTranscriber:
    """A CTCTranscriber over a tiny random wav2vec2/HuBERT CTC model saved under ``cache_dir``.
    ``demo``: as in :func:`tiny_random_whisper`."""
    from speechbias.asr.tiny_models import CTC_LAYOUT, build_tiny_ctc

    folder = build_tiny_ctc(
        Path(cache_dir) / "tiny_models" / f"{family}_ctc_{CTC_LAYOUT}_seed{seed}", family=family, seed=seed
    )
    kwargs.setdefault("name", f"tiny_random_{family}_ctc")
    return CTCTranscriber(model_id=str(folder), **kwargs)
