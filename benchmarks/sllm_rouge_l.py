"""Mean ROUGE-L vs. all others: rapidfuzz (the project's path) vs. rouge_score's RougeScorer, one run.

Goal (issue 23): the library path; statistics of a released-size set < 2 s (benchmarks/sllm_statistics.py).
Usage: python benchmarks/sllm_rouge_l.py [n_texts]   (prints both timings, their ratio and the max |difference|)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from speechbias.sllm.rouge import mean_rouge_l_vs_others


def sentences(n: int, seed: int = 0) -> list[str]:
    """Continuation-like sentences of 5-15 words from a small vocabulary (overlap like real continuations)."""
    rng = np.random.default_rng(seed)
    words = (
        "the a an he she they man woman girl boy old young child went to store home was very good at "
        "cooking fixing cars and trucks nurse doctor engineer loves hates always never works plays"
    ).split()
    return [" ".join(rng.choice(words, int(rng.integers(5, 16)))) + "." for _ in range(n)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    texts = sentences(n)
    print(
        f"n={n} texts ({n * (n - 1) // 2} pairs), {os.cpu_count()} cores, load average %.2f %.2f %.2f" % os.getloadavg()
    )
    t0 = time.perf_counter()
    fast = mean_rouge_l_vs_others(texts, method="rapidfuzz")
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = mean_rouge_l_vs_others(texts, method="rouge_score")
    t_ref = time.perf_counter() - t0
    pairs = n * n // 2
    print(f"rouge_score RougeScorer (reference): {t_ref:8.3f} s  ({t_ref / pairs * 1e6:6.1f} us/pair)")
    print(f"rapidfuzz LCSseq cdist              : {t_fast:8.3f} s  ({t_fast / pairs * 1e6:6.3f} us/pair)")
    print(f"ratio to reference: {t_ref / t_fast:.0f}x faster   max |difference|: {np.max(np.abs(fast - ref)):.2e}")


if __name__ == "__main__":
    main()
