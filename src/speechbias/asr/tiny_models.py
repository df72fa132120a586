"""Tiny randomly initialised ASR models saved as local model folders (tests and offline demos).

They load through exactly the same ``from_pretrained`` path as the real hub checkpoints; their
output text is gibberish. No download: the tokenizers are built here (a byte-level BPE with no
merges plus Whisper's special and timestamp tokens; a character vocabulary for CTC).
"""

from __future__ import annotations

import json
from pathlib import Path

from speechbias.fileio.atomic_file import atomic_folder
from speechbias.model_loading import quiet_transformers_progress

WHISPER_SPECIALS = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|transcribe|>",
    "<|translate|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
)
CTC_CHARS = list("ETAOINSHRDLUCMFWYPVBGKQJXZ'")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode map (the base alphabet of byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def _done(folder: Path) -> bool:
    return (folder / "model.safetensors").is_file() and (folder / ".complete").is_file()


def _save_folder(folder: str | Path, write) -> Path:
    """``folder`` as it is when it holds a complete model; else ``write(tmp)`` saves one into a temporary
    folder, marked complete and renamed to ``folder`` (:func:`~speechbias.fileio.atomic_file.atomic_folder`;
    when another process finished first, its folder is kept)."""
    folder = Path(folder)
    if _done(folder):
        return folder

    def write_complete(tmp: Path) -> None:
        write(tmp)
        (tmp / ".complete").write_text("ok\n")

    with quiet_transformers_progress():
        atomic_folder(folder, write_complete)
    if not _done(folder):
        raise OSError(f"{folder}: exists but holds no complete model; remove it to rebuild")
    return folder


def build_tiny_whisper(folder: str | Path, seed: int = 0) -> Path:
    """Save a 1-layer, d_model=16 random Whisper with processor and generation config to ``folder``."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    def save(tmp: Path) -> None:
        vocab = {ch: i for i, ch in enumerate(_bytes_to_unicode().values())}
        specials = list(WHISPER_SPECIALS) + [f"<|{0.02 * k:.2f}|>" for k in range(1501)]
        tok = WhisperTokenizer(
            vocab=vocab,
            merges=[],
            unk_token="<|endoftext|>",
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
            pad_token="<|endoftext|>",
        )
        tok.add_special_tokens({"additional_special_tokens": specials})
        ids = {t: tok.convert_tokens_to_ids(t) for t in WHISPER_SPECIALS}
        cfg = WhisperConfig(
            vocab_size=len(tok),
            num_mel_bins=80,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_source_positions=1500,
            max_target_positions=64,
            pad_token_id=ids["<|endoftext|>"],
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|endoftext|>"],
            decoder_start_token_id=ids["<|startoftranscript|>"],
            begin_suppress_tokens=None,
            suppress_tokens=None,
        )
        torch.manual_seed(seed)
        model = WhisperForConditionalGeneration(cfg).eval()
        with torch.no_grad():  # make byte tokens outscore special/timestamp tokens so the text is not empty
            model.model.decoder.embed_tokens.weight[:256] *= 4.0
        gen = GenerationConfig(
            decoder_start_token_id=ids["<|startoftranscript|>"],
            eos_token_id=ids["<|endoftext|>"],
            pad_token_id=ids["<|endoftext|>"],
            bos_token_id=ids["<|endoftext|>"],
            max_length=64,
            lang_to_id={"<|en|>": ids["<|en|>"]},
            task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
            no_timestamps_token_id=ids["<|notimestamps|>"],
            prev_sot_token_id=ids["<|startofprev|>"],
            is_multilingual=True,
            max_initial_timestamp_index=50,
            suppress_tokens=[],
            begin_suppress_tokens=[],
        )
        model.generation_config = gen
        model.save_pretrained(tmp)
        WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tok).save_pretrained(tmp)

    return _save_folder(folder, save)


CTC_LAYOUT = "v2"  # bump when the architecture below changes: it names the saved folder


# the families build_tiny_ctc builds (asr.family of conf/asr/tiny_random_ctc.yaml; checked before the run)
TINY_CTC_FAMILIES = ("wav2vec2", "hubert")


def build_tiny_ctc(folder: str | Path, family: str = "wav2vec2", seed: int = 0) -> Path:
    """Save a 1-layer random wav2vec2 or HuBERT CTC model (layer-norm feature encoder with 320x
    downsampling, attention mask) with a character tokenizer to ``folder``."""
    import torch
    from transformers import (
        HubertConfig,
        HubertForCTC,
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    from speechbias.fileio.audio import SAMPLE_RATE

    def save(tmp: Path) -> None:
        vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4}
        vocab.update({c: 5 + i for i, c in enumerate(CTC_CHARS)})
        (tmp / "vocab.json").write_text(json.dumps(vocab))
        tok = Wav2Vec2CTCTokenizer(str(tmp / "vocab.json"), word_delimiter_token="|")
        kwargs = dict(
            vocab_size=len(vocab),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            # 320x downsampling (50 frames/s) like the real models: a 5 s clip is 250 frames, not 4,000
            intermediate_size=32,
            conv_dim=(16, 16, 16, 16),
            conv_stride=(5, 4, 4, 4),
            conv_kernel=(10, 8, 4, 4),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
            feat_extract_norm="layer",
            do_stable_layer_norm=True,
            pad_token_id=0,
            ctc_loss_reduction="mean",
        )
        torch.manual_seed(seed)
        if family == "wav2vec2":
            model = Wav2Vec2ForCTC(Wav2Vec2Config(**kwargs))
        elif family == "hubert":
            model = HubertForCTC(HubertConfig(**kwargs))
        else:
            raise ValueError(f"family must be one of {TINY_CTC_FAMILIES}, got {family!r}")
        model.eval().save_pretrained(tmp)
        fe = Wav2Vec2FeatureExtractor(
            feature_size=1, sampling_rate=SAMPLE_RATE, padding_value=0.0, do_normalize=True, return_attention_mask=True
        )
        Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok).save_pretrained(tmp)

    return _save_folder(folder, save)
