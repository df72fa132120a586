"""Which extraction batch size (``extraction.batch_size``) is fastest on this CPU, measured side by side.

Goal (issue 23): the default batch per device is what measures fastest. For each architecture
(base-sized random wav2vec2 with a layer-norm feature encoder, where clips of different lengths
are padded together, and with wav2vec2-base's group-norm encoder, which only batches equal
lengths) the same clips are extracted through the framework at every batch size, in interleaved
rounds (so drifting machine load hits every size alike), into fresh caches. Rounds repeat until the
fastest size has won the last ``--stable`` rounds in a row (or ``--max-rounds``). Printed: the load
average before and after, the best time of each size, and its ratio to the fastest.

Usage: python benchmarks/extraction_batch_bench.py [--clips 16] [--seconds 3] [--sizes 1 2 4 8] [--threads N]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytorch_lightning as pl
import soundfile as sf
import torch

from speechbias.features.extraction import extract_statistics
from speechbias.upstream.hf import HFUpstream

ARCHITECTURES = {
    "layer-norm encoder (pads mixed lengths)": {
        "feat_extract_norm": "layer",
        "do_stable_layer_norm": True,
        "conv_bias": True,
    },
    "group-norm encoder (wav2vec2-base)": {},
}


def load() -> str:
    """The load average (other processes slow every figure down)."""
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def make_clips(folder: Path, n: int, seconds: float, seed: int = 0) -> list[str]:
    """n clips of 0.5x-1.5x ``seconds`` of tone + noise, as 16 kHz WAV files."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        t = np.arange(int(seconds * rng.uniform(0.5, 1.5) * 16_000)) / 16_000
        x = 0.3 * np.sin(2 * np.pi * rng.uniform(100, 400) * t) + 0.05 * rng.standard_normal(t.shape)
        paths.append(str(folder / f"clip{i:04d}.wav"))
        sf.write(paths[-1], x.astype(np.float32), 16_000)
    return paths


def extraction_seconds(upstream, paths, cache_dir: Path, batch_size: int) -> float:
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
    )
    start = time.perf_counter()
    _, n_forward = extract_statistics(upstream, paths, cache_dir, trainer, batch_size=batch_size)
    assert n_forward == len(paths)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--stable", type=int, default=3, help="rounds the same size must win in a row")
    ap.add_argument("--max-rounds", type=int, default=8)
    ap.add_argument("--only", choices=["layer", "group"], help="one architecture")
    args = ap.parse_args()
    logging.getLogger("speechbias").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{os.cpu_count()} cores, torch threads {torch.get_num_threads()}; before: {load()}")
    print("goal (issue 23): the default extraction.batch_size is the fastest size measured here")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = make_clips(tmp, args.clips, args.seconds)
        audio = sum(sf.info(p).duration for p in paths)
        for arch, extra in ARCHITECTURES.items():
            if args.only and not arch.startswith(args.only):
                continue
            upstream = HFUpstream.from_config_dict("wav2vec2", extra)  # base-sized: 12 blocks, 768 wide
            best = {b: float("inf") for b in args.sizes}
            winners: list[int] = []
            for rnd in range(args.max_rounds):
                times = {}
                for b in args.sizes if rnd % 2 == 0 else args.sizes[::-1]:
                    times[b] = extraction_seconds(upstream, paths, tmp / f"cache_{len(winners)}_{b}_{id(extra)}", b)
                    best[b] = min(best[b], times[b])
                winners.append(min(times, key=times.get))
                if len(winners) >= args.stable and len(set(winners[-args.stable :])) == 1:
                    break
            fastest = min(best, key=best.get)
            print(
                f"\n{arch}: {len(paths)} clips, {audio:.0f} s of audio, {len(winners)} rounds, "
                f"round winners {winners} ({'stable' if len(set(winners[-args.stable :])) == 1 else 'NOT stable'})"
            )
            for b in args.sizes:
                print(
                    f"  batch {b:2d}: best {best[b]:6.2f} s ({audio / best[b]:5.1f} audio s/s)   "
                    f"ratio to the fastest (batch {fastest}) {best[b] / best[fastest]:.2f}"
                )
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
