"""Corpus loaders: scan a corpus as downloaded into a clip table (one row per clip or segment).

Every table has ``clip_id``, ``path``, ``speaker`` and ``corpus`` plus the corpus's metadata
(``sex`` is "female"/"male", ages in years, durations in seconds). Each module documents the
on-disk layout it expects; a layout that does not match raises
:class:`~speechbias.stimuli.corpora.layout.CorpusLayoutError` naming what is missing.
"""

from speechbias.stimuli.corpora.audio_iats import load_mitchell, load_pantos_perkins, load_romero_rivas
from speechbias.stimuli.corpora.buckeye import load_buckeye_segments
from speechbias.stimuli.corpora.coraal import load_coraal_segments
from speechbias.stimuli.corpora.eu_emotion import load_eu_emotion
from speechbias.stimuli.corpora.layout import CorpusLayoutError
from speechbias.stimuli.corpora.mess import load_mess
from speechbias.stimuli.corpora.saa import load_saa, read_saa_metadata
from speechbias.stimuli.corpora.synthesized import load_synthesized
from speechbias.stimuli.corpora.torgo import load_torgo
from speechbias.stimuli.corpora.uaspeech import load_uaspeech

__all__ = [
    "CorpusLayoutError",
    "load_buckeye_segments",
    "load_coraal_segments",
    "load_eu_emotion",
    "load_mess",
    "load_mitchell",
    "load_pantos_perkins",
    "load_romero_rivas",
    "load_saa",
    "load_synthesized",
    "load_torgo",
    "load_uaspeech",
    "read_saa_metadata",
]
