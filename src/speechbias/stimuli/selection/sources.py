"""Where each corpus lives under ``data_root``, and loading each one at most once per build."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora import (
    load_buckeye_segments,
    load_coraal_segments,
    load_eu_emotion,
    load_mess,
    load_mitchell,
    load_pantos_perkins,
    load_romero_rivas,
    load_saa,
    load_synthesized,
    load_torgo,
    load_uaspeech,
)
from speechbias.stimuli.corpora.layout import index_audio

# each corpus: its folder relative to data_root (the SpEAT authors' data/ layout; override per key) and its loader
CORPORA: dict[str, tuple[str, Callable[[Path], pd.DataFrame]]] = {
    "saa": ("speech_accent_archive", load_saa),
    "torgo": ("TORGO", load_torgo),
    "uaspeech": ("UASpeech", load_uaspeech),
    "mess": ("morgan_emotional_speech_set", load_mess),
    "eu_emotion": ("EU_Emotion_Stimulus_Set", load_eu_emotion),
    "buckeye": ("buckeye", load_buckeye_segments),
    "coraal": ("CORAAL", load_coraal_segments),
    "mitchell": ("audio_iats/mitchell_et_al", load_mitchell),
    "pantos_perkins": ("audio_iats/pantos_perkins", load_pantos_perkins),
    "romero_rivas": ("audio_iats/romero_rivas_et_al", load_romero_rivas),
    "synthesized": ("human_synthesized", load_synthesized),
}
CORPUS_DIRS = {key: folder for key, (folder, _) in CORPORA.items()}


class CorpusSources:
    """Corpus folders under ``data_root`` (``corpus_dirs`` overrides entries of :data:`CORPUS_DIRS`;
    relative overrides resolve against ``data_root``) with cached clip tables and audio indexes."""

    def __init__(self, data_root: str | Path | None, corpus_dirs: dict[str, str] | None = None):
        unknown = sorted(set(corpus_dirs or {}) - set(CORPUS_DIRS))
        if unknown:
            raise ValueError(f"corpus_dirs: unknown corpus key(s) {unknown}; known: {sorted(CORPUS_DIRS)}")
        self.data_root = Path(data_root) if data_root is not None else None
        self.dirs = {**CORPUS_DIRS, **(corpus_dirs or {})}
        self._tables: dict[str, pd.DataFrame] = {}
        self._indexes: dict[str, dict[str, Path]] = {}

    def path(self, key: str) -> Path:
        """Folder of corpus ``key``."""
        p = Path(self.dirs[key])
        if p.is_absolute():
            return p
        if self.data_root is None:
            raise ValueError(f"data_root is not set; cannot locate corpus {key!r} ({self.dirs[key]})")
        return self.data_root / p

    def table(self, key: str) -> pd.DataFrame:
        """Clip table of corpus ``key`` (loaded on first use)."""
        if key not in self._tables:
            self._tables[key] = CORPORA[key][1](self.path(key))
        return self._tables[key]

    def audio_index(self, key: str) -> dict[str, Path]:
        """Lower-cased file stem -> audio path, for every audio file of corpus ``key``."""
        if key not in self._indexes:
            self._indexes[key] = index_audio(self.path(key)) if self.path(key).is_dir() else {}
        return self._indexes[key]
