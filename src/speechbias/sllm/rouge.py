"""Mean ROUGE-L F1 of each text against all other texts of a set (the paper's Fig. 1).

Tokenisation is rouge_score's own (:class:`rouge_score.tokenizers.DefaultTokenizer`: lowercase,
non-alphanumerics to spaces, no stemming), and ROUGE-L F1 is rouge_score's definition:
P = LCS/len(prediction), R = LCS/len(target), F = 2PR/(P+R) = 2 LCS / (len_a + len_b), 0 when a
text has no tokens. It is symmetric, so each pair is scored once.

Hand-written LCS, on purpose: all-pairs ROUGE-L over one domain (1,411 distinct continuation texts in
the gender domain = 1.0 M unordered pairs) costs ~57 us a pair through ``RougeScorer.score`` (about a minute);
the dynamic programme below scores blocks of pairs at once in numpy, ~30x faster
(``benchmarks/sllm_rouge_l.py`` measured 29.5x at 600 texts). ``method="rouge_score"`` uses the package
scorer pair by pair; tests check the two agree exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rouge_score import rouge_scorer
from rouge_score.tokenizers import DefaultTokenizer


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """rouge_score's default tokens of each text (no stemming)."""
    tok = DefaultTokenizer(use_stemmer=False)
    return [tok.tokenize(str(t)) for t in texts]


def _encode(token_lists: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids padded with -1: ``(n, max_len)`` int32, and lengths ``(n,)``."""
    vocab: dict[str, int] = {}
    lengths = np.array([len(t) for t in token_lists], dtype=np.int64)
    ids = np.full((len(token_lists), max(1, int(lengths.max(initial=0)))), -1, dtype=np.int32)
    for i, toks in enumerate(token_lists):
        ids[i, : len(toks)] = [vocab.setdefault(t, len(vocab)) for t in toks]
    return ids, lengths


def lcs_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LCS lengths of every row of ``a`` (m, La) with every row of ``b`` (n, Lb), as ``(m, n)``.

    Token ids are >= 0; padding is -1 in ``b`` and -2 in ``a`` so padding never matches. Padding at
    the end of a sequence leaves its LCS unchanged (a non-matching token only carries the maximum
    forward), so padded rows need no masking. ``dp[:, :, j]`` holds, for every pair, the LCS of the
    prefix of ``a`` read so far with the first j tokens of ``b``.
    """
    m, n, width = a.shape[0], b.shape[0], b.shape[1]
    prev = np.zeros((m, n, width + 1), dtype=np.int16)
    for pos in range(a.shape[1]):
        match = a[:, pos, None, None] == b[None, :, :]  # (m, n, Lb)
        cur = np.zeros_like(prev)
        for j in range(width):
            cur[:, :, j + 1] = np.where(match[:, :, j], prev[:, :, j] + 1,
                                        np.maximum(prev[:, :, j + 1], cur[:, :, j]))
        prev = cur
    return prev[:, :, width].astype(np.int64)


def rouge_l_matrix(texts: Sequence[str], block_size: int = 128) -> np.ndarray:
    """Symmetric ``(n, n)`` matrix of ROUGE-L F1 between all texts (diagonal: F1 of a text with itself).

    Pairs are computed in blocks of ``block_size`` rows (memory ~ block_size x n x max_len x 2 bytes).
    """
    ids, lengths = _encode(tokenize(texts))
    n = len(texts)
    a_ids = np.where(ids < 0, -2, ids)
    out = np.zeros((n, n), dtype=np.float64)
    for start in range(0, n, block_size):
        stop = min(n, start + block_size)
        lcs = lcs_block(a_ids[start:stop], ids)
        denom = lengths[start:stop, None] + lengths[None, :]
        out[start:stop] = np.where(denom > 0, 2.0 * lcs / np.maximum(denom, 1), 0.0)
    return out


def mean_rouge_l_vs_others(texts: Sequence[str], method: str = "numpy") -> np.ndarray:
    """Each text's mean ROUGE-L F1 against all *other* texts, ``(n,)``; NaN when n < 2.

    ``method``: ``numpy`` (vectorised LCS, default) or ``rouge_score`` (the package's scorer, pair by pair).
    """
    n = len(texts)
    if n < 2:
        return np.full(n, np.nan)
    if method == "numpy":
        m = rouge_l_matrix(texts)
    elif method == "rouge_score":
        scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
        m = np.zeros((n, n))
        for i in range(n):
            for j in range(i + 1, n):
                m[i, j] = m[j, i] = scorer.score(texts[i], texts[j])["rougeL"].fmeasure
    else:
        raise ValueError(f"method must be 'numpy' or 'rouge_score', got {method!r}")
    np.fill_diagonal(m, 0.0)
    return m.sum(axis=1) / (n - 1)
