from __future__ import annotations

import numpy as np
import pytest
from rouge_score import rouge_scorer

from speechbias.sllm.rouge import mean_rouge_l_vs_others, rouge_l_matrix, token_strings


def test_known_values():
    # LCS("the cat sat", "the cat") = 2 -> F = 2*2/(3+2); "dogs bark" shares nothing
    m = rouge_l_matrix(["The cat sat.", "the cat", "Dogs bark!"])
    assert m[0, 1] == pytest.approx(0.8) and m[1, 0] == pytest.approx(0.8)
    assert m[0, 2] == 0.0
    means = mean_rouge_l_vs_others(["The cat sat.", "the cat", "Dogs bark!"])
    assert means == pytest.approx([0.4, 0.4, 0.0])


def textbook_lcs(a: list[str], b: list[str]) -> int:
    """The O(len a * len b) dynamic programme, written out here as the independent reference."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[len(a)][len(b)]


def test_equals_rouge_score_package_and_textbook_lcs():
    rng = np.random.default_rng(0)
    words = "a b c d e f the of to she he it".split()
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 12)))) for _ in range(40)] + ["", "?!", "x " * 30]
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    tokenizer = scorer._tokenizer
    m = rouge_l_matrix(texts)
    for i in range(len(texts)):
        for j in range(len(texts)):
            assert m[i, j] == pytest.approx(scorer.score(texts[i], texts[j])["rougeL"].fmeasure, abs=1e-12)
            a, b = tokenizer.tokenize(texts[i]), tokenizer.tokenize(texts[j])
            expected = 2 * textbook_lcs(a, b) / (len(a) + len(b)) if a or b else 0.0
            assert m[i, j] == expected  # the same float: 2 * int / int
    np.testing.assert_allclose(mean_rouge_l_vs_others(texts), mean_rouge_l_vs_others(texts, "rouge_score"), atol=1e-12)


def test_large_vocabulary_skips_surrogates():
    # more distinct tokens than code points below the surrogate block: ids past it stay distinct strs
    tokens = [[f"w{i}" for i in range(k, k + 5)] for k in range(0, 60_000, 5)]
    strings = token_strings(tokens)
    assert len(set("".join(strings))) == 60_000
    assert all(s.encode("utf-8") for s in strings)  # no lone surrogates


def test_unknown_method_is_named():
    with pytest.raises(ValueError, match="rapidfuzz"):
        mean_rouge_l_vs_others(["a", "b"], method="numpy")
