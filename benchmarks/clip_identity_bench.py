"""What recording every clip's audio identity in the run digest costs, on 2,000 cached clips, side by side.

Made once in a temporary folder: N short WAV files (default 2,000), a manifest listing them, and their
audio-index records (each file decoded once, as a first run's clip check does). Then, in fresh
processes (a run's own), interleaved over repeats:

* check: the pre-run clip check every run already makes (``check_manifest_audio``: each clip's index
  record read from disk and verified);
* clips after check: :func:`speechbias.tasks.clip_identity.run_clips` right after it in the same process,
  what the run digest adds to a run (the manifest read again, a stat per clip; records remembered);
* clips alone: ``run_clips`` in a process that made no check (records read from disk);
* digest JSON: the run digest's canonical JSON and sha256 without and with the clips.

Prints the best time of each in ms, per clip in us, and the ratio of what the digest adds to the check.
Usage: python benchmarks/clip_identity_bench.py [--clips 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
from speechbias.stimuli.manifest import check_manifest_audio, read_manifest_rows
from speechbias.tasks.clip_identity import run_clips
from speechbias.tasks.run_markers import identity_digest

manifest, cache, alone = sys.argv[1], sys.argv[2], sys.argv[3] == "alone"
values = {"bias_test.manifest": json.dumps(manifest), "seed": "0"}
out = {}
if alone:
    t0 = time.perf_counter(); clips = run_clips(None, values, cache); out["clips alone"] = time.perf_counter() - t0
else:
    t0 = time.perf_counter()
    check_manifest_audio(read_manifest_rows(manifest, required_roles=()), manifest, cache)
    out["check"] = time.perf_counter() - t0
    t0 = time.perf_counter(); clips = run_clips(None, values, cache); out["clips after check"] = time.perf_counter() - t0
    plain = {"values": values, "extra": {}}
    t0 = time.perf_counter(); identity_digest(plain); out["digest JSON without clips"] = time.perf_counter() - t0
    t0 = time.perf_counter(); identity_digest({**plain, "clips": clips}); out["digest JSON with clips"] = time.perf_counter() - t0
assert len(clips) == int(sys.argv[4]), len(clips)
print(json.dumps(out))
"""


def make_clips(folder: Path, n: int) -> tuple[Path, Path]:
    """``n`` WAV files of 0.1 s noise, a manifest of them and their audio-index records."""
    import numpy as np
    import soundfile as sf

    from speechbias.fileio.audio_index import AudioIndex

    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        path = folder / "clips" / f"{i:05d}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, rng.uniform(-0.5, 0.5, 1600), 16000, subtype="PCM_16")
        rows.append({"clip_id": f"c{i}", "path": str(path), "role": "XYAB"[i % 4]})
    manifest = folder / "manifest.csv"
    with open(manifest, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["clip_id", "path", "role"])
        writer.writeheader()
        writer.writerows(rows)
    cache = folder / "cache"
    facts = AudioIndex(cache).facts([r["path"] for r in rows])
    assert not any(isinstance(v, str) for v in facts.values())
    return manifest, cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifest, cache = make_clips(Path(tmp), args.clips)
        best: dict[str, float] = {}
        for _ in range(args.repeats):
            for mode in ("check", "alone"):
                command = [sys.executable, "-c", CHILD, str(manifest), str(cache), mode, str(args.clips)]
                times = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
                for key, seconds in times.items():
                    best[key] = min(best.get(key, seconds), seconds)
    print(f"{args.clips} cached clips, best of {args.repeats} fresh processes:")
    for key, seconds in best.items():
        print(f"  {key:28s} {1000 * seconds:8.2f} ms  {1e6 * seconds / args.clips:6.1f} us/clip")
    added = best["clips after check"] + best["digest JSON with clips"] - best["digest JSON without clips"]
    print(
        f"the digest's clips add {1000 * added:.2f} ms to a run ({1e6 * added / args.clips:.1f} us a clip), "
        f"{added / best['check']:.2f}x the clip check it follows ({1000 * best['check']:.2f} ms)"
    )


if __name__ == "__main__":
    main()
