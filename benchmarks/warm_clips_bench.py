"""Warm runs over many cached clips: CPU time and decoded files of ``python evaluate.py`` with 40 vs 2,000
cached clips, this checkout vs a reference checkout, side by side in one run.

Goal (issue 33): a warm run of 2,000 cached clips costs at most 1.2x the 40-clip run plus 0.5 ms per clip,
because a clip whose file is unchanged is decoded neither by the pre-run clip check nor by the cache lookup
(the audio index, ``speechbias.fileio.audio_index``).

Clips are generated in a temporary folder (``--seconds`` of noise, default 2 s, 16 kHz 16-bit FLAC, roles X, Y,
A, B in turn); the
upstream is the weight-free fbank; each checkout fills its own feature cache once (cold, not timed), then
per round and checkout (interleaved, so drifting load hits both alike) three warm situations run:

- ``warm``: nothing changed since the last run;
- ``1 touched``: one clip's mtime moved (a different clip each round), as an editor, ``touch`` or a copy does;
- ``new manifest``: the same cached clips listed in a new manifest (rows reversed), as a new test or an
  edited manifest does.

Each checkout has its own copy of the clips (the same samples) and its own cache.

Printed per situation: the best CPU time (user + system of the child) and wall time of ``--repeats``
rounds, the files decoded (counted by a wrapper that wraps ``speechbias.fileio.audio._decode_checked``,
which every decode of both checkouts goes through; the entry point ends with ``os._exit``, so each decode
is appended to a file), the 2,000/40 ratio and the goal's bound.

Usage: python benchmarks/warm_clips_bench.py [--reference /tmp/ref_index] [--sizes 40 2000] [--repeats 3]
(the reference: ``git worktree add /tmp/ref_index f54227d``)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
GOAL_RATIO, GOAL_MS_PER_CLIP = 1.2, 0.5
SITUATIONS = ("warm", "1 touched", "new manifest")
COUNTING_RUN = """
import os, runpy, sys
import speechbias.fileio.audio as audio
real = audio._decode_checked
def counted(path):
    with open(os.environ["DECODE_LOG"], "a") as log:
        log.write(str(path) + "\\n")
    return real(path)
audio._decode_checked = counted
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
FAST = ("upstream=fbank", "logger=none", "speat.n_permutations=1000", "speat.per_layer=false")


def make_clips(folder: Path, n: int, seconds: float, suffix: str) -> tuple[Path, list[Path]]:
    """``n`` clips of ``seconds`` of noise (16 kHz, 16-bit, ``suffix`` .wav or .flac) and their manifest."""
    rng = np.random.default_rng(0)
    (folder / "audio").mkdir(parents=True)
    rows, clips = ["clip_id,path,role,group,speaker,pair_id,stratum"], []
    for i in range(n):
        role = "XYAB"[i % 4]
        clip = folder / "audio" / f"c{i:05d}{suffix}"
        samples = (0.1 * rng.standard_normal(int(seconds * 16_000))).astype(np.float32)
        sf.write(clip, samples, 16_000, subtype="PCM_16")
        rows.append(f"c{i:05d},audio/{clip.name},{role},g{role},s{i},,")
        clips.append(clip)
    (folder / "m.csv").write_text("\n".join(rows) + "\n")
    return folder / "m.csv", clips


def reversed_manifest(manifest: Path, name: str) -> Path:
    header, *rows = manifest.read_text().splitlines()
    out = manifest.with_name(name)
    out.write_text("\n".join([header, *rows[::-1]]) + "\n")
    return out


def run(root: Path, manifest: Path, cache: Path, run_dir: Path, log: Path) -> tuple[float, float, int]:
    """(CPU seconds: user + system, wall seconds, files decoded) of one ``evaluate.py`` of checkout ``root``."""
    log.write_text("")
    env = dict(os.environ, PYTHONPATH=str(root / "src"), HF_HUB_OFFLINE="1", WANDB_MODE="offline", DECODE_LOG=str(log))
    cmd = [
        sys.executable,
        "-c",
        COUNTING_RUN,
        str(root / "evaluate.py"),
        f"bias_test.manifest={manifest}",
        f"paths.cache_dir={cache}",
        f"hydra.run.dir={run_dir}",
        *FAST,
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=run_dir.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({root}): {' '.join(cmd[3:])}\n{stderr[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall, len(log.read_text().split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=Path("/tmp/ref_index"), help="the reference checkout's root")
    ap.add_argument("--sizes", type=int, nargs=2, default=[40, 2000], help="the small and the large manifest")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each clip")
    ap.add_argument("--suffix", choices=[".flac", ".wav"], default=".flac", help="the clips' format")
    args = ap.parse_args()
    checkouts = {"reference": args.reference.resolve(), "this checkout": REPO}
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}")
    print(f"this checkout: {REPO}; reference: {checkouts['reference']}")
    best: dict[tuple[str, int, str], tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "runs").mkdir()
        for n in args.sizes:
            data = {}
            for label, root in checkouts.items():  # each checkout's own clips and cache, filled (not timed)
                key = label.replace(" ", "_")
                data[label] = make_clips(tmp / f"clips-{key}-{n}", n, args.seconds, args.suffix)
                run(root, data[label][0], tmp / f"cache-{key}-{n}", tmp / "runs" / f"fill-{key}-{n}", tmp / "log")
            for rep in range(args.repeats):
                for label, root in checkouts.items():
                    key = label.replace(" ", "_")
                    cache = tmp / f"cache-{key}-{n}"
                    manifest, clips = data[label]
                    for situation in SITUATIONS:
                        m = manifest
                        if situation == "1 touched":
                            st = clips[rep].stat()
                            os.utime(clips[rep], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
                        elif situation == "new manifest":
                            m = reversed_manifest(manifest, f"m-{key}-{rep}.csv")
                        folder = tmp / "runs" / f"{key}-{n}-{situation.replace(' ', '_')}-{rep}"
                        result = run(root, m, cache, folder, tmp / "log")
                        k = (label, n, situation)
                        best[k] = min(best.get(k, result), result)
    small, large = args.sizes
    print(
        f"\nwarm evaluate.py (fbank, {' '.join(FAST[1:])}; clips of {args.seconds:g} s {args.suffix}), best of "
        f"{args.repeats} rounds; CPU s (wall s) "
        f"[files decoded]; load average after: {os.getloadavg()[0]:.2f}"
    )
    print(f"{'situation':14s} {'checkout':14s} {small:>6d} clips        {large:>6d} clips        ratio  goal bound")
    for situation in SITUATIONS:
        for label in checkouts:
            (c1, w1, d1), (c2, w2, d2) = best[(label, small, situation)], best[(label, large, situation)]
            bound = GOAL_RATIO * c1 + GOAL_MS_PER_CLIP / 1000 * large
            verdict = "met" if c2 <= bound else "NOT met"
            print(
                f"{situation:14s} {label:14s} {c1:5.2f} ({w1:5.2f}) [{d1:4d}]  {c2:5.2f} ({w2:5.2f}) [{d2:4d}]  "
                f"{c2 / c1:5.2f}x  <= {bound:.2f} s CPU: {verdict}"
            )
    print(
        f"goal: {large} clips <= {GOAL_RATIO:g}x the {small}-clip run + {GOAL_MS_PER_CLIP:g} ms per clip "
        "(CPU time; both checkouts measured in the same rounds)"
    )


if __name__ == "__main__":
    main()
