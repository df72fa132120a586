"""Mean ROUGE-L F1 of each text against all other texts of a set (the paper's Fig. 1).

Tokenisation is rouge_score's own (``rouge_score.tokenize.tokenize`` without a stemmer, which is what
its ``DefaultTokenizer(use_stemmer=False)`` calls: lowercase, non-alphanumerics to spaces; imported
directly because ``rouge_score.tokenizers`` imports nltk, 1.7 s of start-up), and ROUGE-L F1 is rouge_score's definition:
P = LCS/len(prediction), R = LCS/len(target), F = 2PR/(P+R) = 2 LCS / (len_a + len_b), 0 when a
text has no tokens. It is symmetric.

The LCS lengths of all pairs come from rapidfuzz (``process.cdist`` with the ``LCSseq`` scorer,
bit-parallel C++, both cores): each distinct token becomes one character, so a text is a string
of its tokens and the LCS of two such strings is the token LCS. ``benchmarks/sllm_rouge_l.py``
measures it against ``RougeScorer.score`` pair by pair (``method="rouge_score"``) in one run; tests
check the two give the same matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METHODS = ("rapidfuzz", "rouge_score")
# Token ids become code points from here on, skipping the surrogate block (not valid in a str).
_FIRST_CODE_POINT = 0x100
_SURROGATES = (0xD800, 0xE000)


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """rouge_score's default tokens of each text (no stemming)."""
    from rouge_score.tokenize import tokenize as rouge_tokenize

    return [rouge_tokenize(str(t), None) for t in texts]


def _code_point(token_id: int) -> str:
    cp = _FIRST_CODE_POINT + token_id
    if cp >= _SURROGATES[0]:
        cp += _SURROGATES[1] - _SURROGATES[0]
    return chr(cp)


def token_strings(token_lists: list[list[str]]) -> list[str]:
    """One string per text, one character per token (equal tokens -> equal characters)."""
    vocab: dict[str, str] = {}
    return ["".join(vocab.setdefault(t, _code_point(len(vocab))) for t in toks) for toks in token_lists]


def rouge_l_matrix(texts: Sequence[str]) -> np.ndarray:
    """Symmetric ``(n, n)`` float64 matrix of ROUGE-L F1 between all texts (diagonal: a text with itself)."""
    from rapidfuzz import process
    from rapidfuzz.distance import LCSseq

    strings = token_strings(tokenize(texts))
    lcs = process.cdist(strings, strings, scorer=LCSseq.similarity, dtype=np.int32, workers=-1)
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    denom = lengths[:, None] + lengths[None, :]
    return np.where(denom > 0, 2.0 * lcs / np.maximum(denom, 1), 0.0)


def rouge_l_matrix_rouge_score(texts: Sequence[str]) -> np.ndarray:
    """The same matrix through ``rouge_score``'s own scorer, pair by pair (the reference; slow)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    n = len(texts)
    m = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            m[i, j] = m[j, i] = scorer.score(texts[i], texts[j])["rougeL"].fmeasure
    return m


def mean_rouge_l_vs_others(texts: Sequence[str], method: str = "rapidfuzz") -> np.ndarray:
    """Each text's mean ROUGE-L F1 against all *other* texts, ``(n,)``; NaN when n < 2.

    ``method``: ``rapidfuzz`` (default) or ``rouge_score`` (the package's scorer, pair by pair).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    n = len(texts)
    if n < 2:
        return np.full(n, np.nan)
    m = rouge_l_matrix(texts) if method == "rapidfuzz" else rouge_l_matrix_rouge_score(texts)
    np.fill_diagonal(m, 0.0)
    return m.sum(axis=1) / (n - 1)
