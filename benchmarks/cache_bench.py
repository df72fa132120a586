"""Feature-cache benchmark: what checksum verification costs a warm run, measured side by side.

1. A warm run over N entries (default 1,000 of 25 layers x 1024 dims x 3 statistics float32 +
   a frame count, 300 KiB each, as a 24-layer large model gives): ``FeatureCache.get`` with and
   without checksum verification, interleaved over repeats (the files stay in the page cache, so
   this is the CPU cost, the worst case for the checksum's share). Prints seconds, ms per entry,
   the ratio and the verification cost per entry and in %.
2. Why xxh3-128: the digest alone over one entry's tensor bytes for xxh3-128 (used), sha256,
   blake2b-256 and crc32, as ms per entry and as % of an unverified read.
3. Writing: ``FeatureCache.put`` per entry (it computes the checksum once).

Usage: python benchmarks/cache_bench.py [--entries 1000] [--layers 25] [--dim 1024] [--repeats 5]
The machine's load average is printed before and after: other processes slow every figure down.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import xxhash

from speechbias.features.cache import ClipStatistics, FeatureCache, tensor_checksum

FINGERPRINT = "bench"


def make_entries(cache: FeatureCache, n: int, layers: int, dim: int, seed: int = 0) -> tuple[list[str], float]:
    """Write ``n`` random entries; returns their audio keys and the seconds ``put`` took in all."""
    rng = np.random.default_rng(seed)
    keys, spent = [], 0.0
    for i in range(n):
        mean = rng.standard_normal((layers, dim), dtype=np.float32)
        stats = ClipStatistics(mean=mean, min=mean - 1, max=mean + 1, n_frames=int(rng.integers(50, 500)))
        key = f"{i:064x}"
        t0 = time.perf_counter()
        cache.put(FINGERPRINT, key, stats)
        spent += time.perf_counter() - t0
        keys.append(key)
    return keys, spent


def warm_read(cache: FeatureCache, keys: list[str]) -> float:
    """Seconds to ``get`` every key; fails loudly if any entry does not load."""
    t0 = time.perf_counter()
    for key in keys:
        if cache.get(FINGERPRINT, key) is None:
            raise RuntimeError(f"entry {key} did not load")
    return time.perf_counter() - t0


def digest_ms(digest, buffers: list[memoryview], repeats: int) -> float:
    """Median over repeats of the mean ms per entry of ``digest`` over each entry's buffers."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for buf in buffers:
            digest(buf)
        times.append((time.perf_counter() - t0) / len(buffers) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=25)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")

    with tempfile.TemporaryDirectory(prefix="cache_bench_") as tmp:
        root = Path(tmp)
        writer = FeatureCache(root)
        keys, put_s = make_entries(writer, args.entries, args.layers, args.dim)
        entry_bytes = writer.entry_path(FINGERPRINT, keys[0]).stat().st_size
        print(
            f"{args.entries} entries of {args.layers} x {args.dim} x 3 float32 + n_frames "
            f"({entry_bytes / 1024:.0f} KiB each, {args.entries * entry_bytes / 2**20:.0f} MiB)"
        )

        verified, plain = FeatureCache(root), FeatureCache(root, verify_checksums=False)
        warm_read(verified, keys)  # page cache warm for both
        times = {"verified": [], "unverified": []}
        for _ in range(args.repeats):  # interleaved, so drifting load hits both alike
            times["unverified"].append(warm_read(plain, keys))
            times["verified"].append(warm_read(verified, keys))
        t_plain, t_ver = statistics.median(times["unverified"]), statistics.median(times["verified"])
        per_entry_ms = (t_ver - t_plain) / args.entries * 1e3
        print(f"\n1. warm run, median of {args.repeats} interleaved repeats")
        print(f"   get without verification: {t_plain:.3f} s  ({t_plain / args.entries * 1e3:.3f} ms/entry)")
        print(f"   get with verification:    {t_ver:.3f} s  ({t_ver / args.entries * 1e3:.3f} ms/entry)")
        print(
            f"   ratio verified / unverified: {t_ver / t_plain:.3f}  "
            f"(verification: {per_entry_ms:.3f} ms/entry, {100 * (t_ver - t_plain) / t_plain:+.1f} %)"
        )

        sample = [plain.get(FINGERPRINT, k) for k in keys[: min(200, len(keys))]]
        buffers = [
            memoryview(np.ascontiguousarray(np.stack([s.mean, s.min, s.max])).reshape(-1)).cast("B") for s in sample
        ]
        digests = {
            "xxh3-128 (used)": lambda b: xxhash.xxh3_128_hexdigest(b),
            "sha256": lambda b: hashlib.sha256(b).hexdigest(),
            "blake2b-256": lambda b: hashlib.blake2b(b, digest_size=32).hexdigest(),
            "crc32": lambda b: zlib.crc32(b),
        }
        unverified_ms = t_plain / args.entries * 1e3
        print(
            f"\n2. digest alone over one entry's tensor bytes ({buffers[0].nbytes / 1024:.0f} KiB), "
            f"median of {args.repeats}"
        )
        for name, fn in digests.items():
            ms = digest_ms(fn, buffers, args.repeats)
            print(
                f"   {name:16s} {ms:.3f} ms/entry  ({buffers[0].nbytes / ms / 1e6:.2f} GB/s, "
                f"{100 * ms / unverified_ms:.0f} % of an unverified read)"
            )
        t0 = time.perf_counter()
        for s in sample:
            tensor_checksum(
                {"mean": s.mean, "min": s.min, "max": s.max, "n_frames": np.asarray(s.n_frames, dtype=np.int64)}
            )
        print(
            f"   tensor_checksum (xxh3-128 over the 4 tensors as stored): "
            f"{(time.perf_counter() - t0) / len(sample) * 1e3:.3f} ms/entry"
        )

        print(f"\n3. put (checksum + safetensors + atomic rename): {put_s / args.entries * 1e3:.3f} ms/entry")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
