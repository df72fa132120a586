"""Text normalisation and per-utterance word-error counts (jiwer).

Normalisers: ``whisper_english`` (Whisper's EnglishTextNormalizer from the whisper-normalizer
package: lower case, punctuation, spelled numbers, British/American spellings, fillers removed),
``whisper_basic`` (BasicTextNormalizer: lower case, punctuation and symbols removed) and ``none``
(whitespace only). The same normaliser is applied to reference and hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jiwer
import pandas as pd

NORMALIZERS = ("whisper_english", "whisper_basic", "none")
COUNT_COLUMNS = ("ref_words", "hyp_words", "substitutions", "deletions", "insertions", "hits", "errors")


def make_normalizer(kind: str = "whisper_english") -> Callable[[str], str]:
    """A callable str -> normalised str (words separated by single spaces)."""
    if kind == "whisper_english":
        from whisper_normalizer.english import EnglishTextNormalizer

        norm = EnglishTextNormalizer()
    elif kind == "whisper_basic":
        from whisper_normalizer.basic import BasicTextNormalizer

        norm = BasicTextNormalizer()
    elif kind == "none":

        def norm(text: str) -> str:
            return text
    else:
        raise ValueError(f"normalizer must be one of {list(NORMALIZERS)}, got {kind!r}")

    def apply(text: str) -> str:
        return " ".join(norm(str(text)).split())

    return apply


def error_counts(references: Sequence[str], hypotheses: Sequence[str]) -> pd.DataFrame:
    """Per-utterance substitutions, deletions, insertions, hits, reference/hypothesis word counts.

    Inputs are already normalised. ``errors = S + D + I`` and ``ref_words = H + S + D``. An empty
    reference gives ref_words 0 (the caller must exclude it: its WER is undefined).
    """
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    rows = []
    nonempty = [i for i, r in enumerate(references) if r.strip()]
    result = {}
    if nonempty:
        out = jiwer.process_words([references[i] for i in nonempty], [hypotheses[i] for i in nonempty])
        for i, chunks in zip(nonempty, out.alignments):
            c = {"substitute": 0, "delete": 0, "insert": 0, "equal": 0}
            for ch in chunks:
                n = (ch.hyp_end_idx - ch.hyp_start_idx) if ch.type == "insert" else (ch.ref_end_idx - ch.ref_start_idx)
                c[ch.type] += n
            result[i] = c
    for i, (_ref, hyp) in enumerate(zip(references, hypotheses)):
        hyp_words = len(hyp.split())
        if i in result:
            c = result[i]
            s, d, ins, h = c["substitute"], c["delete"], c["insert"], c["equal"]
        else:
            s, d, ins, h = 0, 0, hyp_words, 0
        rows.append(
            {
                "ref_words": h + s + d,
                "hyp_words": hyp_words,
                "substitutions": s,
                "deletions": d,
                "insertions": ins,
                "hits": h,
                "errors": s + d + ins,
            }
        )
    return pd.DataFrame(rows, columns=list(COUNT_COLUMNS))


def score_utterances(
    references: Sequence[str], hypotheses: Sequence[str], normalizer: str = "whisper_english"
) -> pd.DataFrame:
    """Normalise both sides and count errors: columns reference_norm, hypothesis_norm + COUNT_COLUMNS."""
    norm = make_normalizer(normalizer)
    refs = [norm(r) for r in references]
    hyps = [norm(h) for h in hypotheses]
    counts = error_counts(refs, hyps)
    counts.insert(0, "hypothesis_norm", hyps)
    counts.insert(0, "reference_norm", refs)
    return counts
