from __future__ import annotations

import numpy as np
import pytest
from rouge_score import rouge_scorer

from speechbias.sllm.rouge import mean_rouge_l_vs_others, rouge_l_matrix


def test_known_values():
    # LCS("the cat sat", "the cat") = 2 -> F = 2*2/(3+2); "dogs bark" shares nothing
    m = rouge_l_matrix(["The cat sat.", "the cat", "Dogs bark!"])
    assert m[0, 1] == pytest.approx(0.8) and m[1, 0] == pytest.approx(0.8)
    assert m[0, 2] == 0.0
    means = mean_rouge_l_vs_others(["The cat sat.", "the cat", "Dogs bark!"])
    assert means == pytest.approx([0.4, 0.4, 0.0])


def test_equals_rouge_score_package():
    rng = np.random.default_rng(0)
    words = "a b c d e f the of to she he it".split()
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 12)))) for _ in range(40)] + ["", "?!", "x " * 30]
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    m = rouge_l_matrix(texts, block_size=7)
    for i in range(len(texts)):
        for j in range(len(texts)):
            assert m[i, j] == pytest.approx(scorer.score(texts[i], texts[j])["rougeL"].fmeasure, abs=1e-12)
    np.testing.assert_allclose(mean_rouge_l_vs_others(texts), mean_rouge_l_vs_others(texts, "rouge_score"),
                               atol=1e-12)
