"""Mean ROUGE-L vs. all others: vectorised numpy LCS vs. rouge_score's RougeScorer, same texts, one run.

Usage: python benchmarks/sllm_rouge_l.py [n_texts]   (prints both timings, their ratio and the max |difference|)
"""

from __future__ import annotations

import sys
import time

import numpy as np

from speechbias.sllm.rouge import mean_rouge_l_vs_others


def sentences(n: int, seed: int = 0) -> list[str]:
    """Continuation-like sentences of 5-15 words from a small vocabulary (overlap like real continuations)."""
    rng = np.random.default_rng(seed)
    words = ("the a an he she they man woman girl boy old young child went to store home was very good at "
             "cooking fixing cars and trucks nurse doctor engineer loves hates always never works plays").split()
    return [" ".join(rng.choice(words, int(rng.integers(5, 16)))) + "." for _ in range(n)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    texts = sentences(n)
    t0 = time.perf_counter()
    fast = mean_rouge_l_vs_others(texts, method="numpy")
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = mean_rouge_l_vs_others(texts, method="rouge_score")
    t_ref = time.perf_counter() - t0
    pairs = n * (n - 1) // 2
    print(f"n={n} texts ({pairs} pairs)")
    print(f"rouge_score RougeScorer: {t_ref:8.2f} s  ({t_ref / pairs * 1e6:6.1f} us/pair)")
    print(f"numpy vectorised LCS   : {t_fast:8.2f} s  ({t_fast / pairs * 1e6:6.2f} us/pair)")
    print(f"speed-up: {t_ref / t_fast:.1f}x   max |difference|: {np.max(np.abs(fast - ref)):.2e}")


if __name__ == "__main__":
    main()
