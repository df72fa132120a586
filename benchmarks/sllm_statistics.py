"""Spoken StereoSet dataset statistics (Table 2 + Fig. 1) on a fixture of the released size, timed step by step.

The fixture has the released layout and row counts (gender 2,847 rows, age 793), each voice its own
id as in the released CSVs, and generated continuation texts shared by the voices of a context
(``--voices`` voices per context; 6 gives 1,425 distinct gender texts, close to the release's 1,411).
WAVs are 0.2 s tones (only their headers are read).

Goal (issue 23): statistics of a released-size set < 2 s. The reference measured in the same run is
rouge_score's own scorer (pair by pair) over the age domain's continuations, against the project's
rapidfuzz path on the same texts.

Usage: python benchmarks/sllm_statistics.py [--voices 6] [--compare-old]
``--compare-old`` also times ROUGE-L over the continuations keyed by (id, kind, text), the keying
before deduplication by text (minutes on 2 cores), and prints the ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from speechbias.report.run_writer import RunWriter
from speechbias.sllm import CONTINUATION_KINDS
from speechbias.sllm.data import load_spoken_stereoset
from speechbias.sllm.rouge import mean_rouge_l_vs_others
from speechbias.sllm.statistics import (
    continuation_rouge_l,
    dataset_statistics,
    distinct_continuations,
    plot_rouge_l_histogram,
)

RELEASED_ROWS = {"gender": 2847, "age": 793}
GROUPS = {"gender": ("female", "male"), "age": ("child", "young", "elderly")}
WORDS = (
    "the a an he she they man woman girl boy old young child grandfather grandmother went to store home "
    "was very good at cooking fixing cars trucks nurse doctor engineer loves hates always never works plays "
    "phone computer garden kitchen garage school office music football dance paint read slowly quickly"
).split()


def sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(5, 16)))).capitalize() + "."


def write_fixture(root: Path, voices: int, seed: int = 0) -> dict[str, int]:
    """Released layout under ``root``; returns distinct continuation texts per domain."""
    rng = np.random.default_rng(seed)
    tone = (0.3 * np.sin(2 * np.pi * 220 * np.arange(3200) / 16_000)).astype(np.float32)
    distinct = {}
    for domain, n_rows in RELEASED_ROWS.items():
        rows, texts = [], set()
        for row in range(n_rows):
            context = row // voices
            if row % voices == 0:
                conts = {kind: sentence(rng) for kind in CONTINUATION_KINDS}
                group = GROUPS[domain][context % len(GROUPS[domain])]
                texts.update(conts.values())
            speaker = f"{group}_{row % voices}"
            rows.append(
                {
                    "id": row,
                    "speaker": speaker,
                    domain: group,
                    "context": f"Context number {context}.",
                    **conts,
                    "labels": "{}",
                    "annotators": "[]",
                }
            )
            path = root / "speech" / domain / f"{row:05d}_{speaker}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            sf.write(str(path), tone, 16_000, subtype="PCM_16")
        (root / "metadata").mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(root / "metadata" / f"{domain}_v1.0.csv", index=False)
        distinct[domain] = len(texts)
    return distinct


def timed(label: str, fn, times: dict):
    t0 = time.perf_counter()
    out = fn()
    times[label] = time.perf_counter() - t0
    print(f"  {label:<42} {times[label]:7.2f} s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voices", type=int, default=6)
    parser.add_argument("--compare-old", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "spoken_stereoset"
        distinct = write_fixture(root, args.voices)
        print(
            f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
            + f"fixture: rows {RELEASED_ROWS}, {args.voices} voices per context, distinct texts {distinct}"
        )
        times: dict[str, float] = {}
        table = timed("load_spoken_stereoset", lambda: load_spoken_stereoset(root).table, times)
        conts = distinct_continuations(table)
        print(
            f"  continuations scored: {conts.groupby('domain', sort=False).size().to_dict()} "
            f"(keyed by (id, kind, text): {len(table) * 3})"
        )
        rouge = timed("continuation_rouge_l (all pairs per domain)", lambda: continuation_rouge_l(table), times)
        timed("dataset_statistics (WAV headers, Table 2)", lambda: dataset_statistics(table, rouge), times)
        timed(
            "plot_rouge_l_histogram (Fig. 1)",
            lambda: RunWriter(tmp).figure("hist", plot_rouge_l_histogram(rouge)),
            times,
        )
        total = sum(times.values())
        print(f"statistics total: {total:.2f} s (goal: < 2 s)")
        age = conts.loc[conts["domain"] == "age", "text"].tolist()
        fast = timed(f"ROUGE-L age domain ({len(age)} texts), rapidfuzz", lambda: mean_rouge_l_vs_others(age), times)
        ref = timed(
            f"ROUGE-L age domain ({len(age)} texts), rouge_score",
            lambda: mean_rouge_l_vs_others(age, method="rouge_score"),
            times,
        )
        ratio = (
            times[f"ROUGE-L age domain ({len(age)} texts), rouge_score"]
            / times[f"ROUGE-L age domain ({len(age)} texts), rapidfuzz"]
        )
        print(
            f"ratio to the rouge_score reference: {ratio:.0f}x faster, max |difference| {np.abs(fast - ref).max():.1e}"
        )
        if args.compare_old:
            old = table.melt(id_vars=["domain", "id"], value_vars=list(CONTINUATION_KINDS), value_name="text")
            old = old.drop_duplicates(["domain", "id", "variable", "text"])
            print(f"keyed by (id, kind, text): {old.groupby('domain', sort=False).size().to_dict()} continuations")
            old_label, new_label = "ROUGE-L keyed by (id, kind, text)", "continuation_rouge_l (all pairs per domain)"
            timed(
                old_label, lambda: [mean_rouge_l_vs_others(p["text"].tolist()) for _, p in old.groupby("domain")], times
            )
            print(f"ROUGE-L speed-up of deduplication by text: {times[old_label] / times[new_label]:.1f}x")


if __name__ == "__main__":
    main()
