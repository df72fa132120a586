"""Warm runs (every clip cached): wall time and peak memory of ``python evaluate.py`` / ``python train.py``,
this checkout vs. a reference checkout, side by side in one run.

Goals (issue 23): a warm run builds and loads no model (peak memory within 1.2x of a process that
only imports the same libraries), and a warm ``python evaluate.py`` takes <= 3 s. Each command runs
first once to fill a shared feature cache, then ``--repeats`` times per checkout, interleaved (so
drifting machine load hits both alike); the best wall time and the peak RSS (``ru_maxrss`` of the
child) are printed, with the floor: a process that imports torch, pytorch_lightning and transformers
and does nothing else.

Usage: python benchmarks/warm_run_bench.py [--reference /work/main/src] [--upstream random_wav2vec2_base] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def run(cmd: list[str], src: Path, cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process with ``src`` first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({src}): {' '.join(cmd)}\n{proc.stderr.read()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=Path("/work/main/src"), help="src folder of the reference checkout")
    ap.add_argument("--upstream", default="random_wav2vec2_base")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["demo", "upstream"], help="one of the two commands")
    args = ap.parse_args()
    ours = REPO / "src"
    print(f"{os.cpu_count()} cores; before: {load()}")
    print("goals (issue 23): warm runs build no model, peak memory <= 1.2x the import-only floor; "
          "warm `python evaluate.py` <= 3 s")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        common = ["logger=none", f"paths.cache_dir={tmp / 'cache'}", "trainer.enable_progress_bar=false"]
        commands = {
            "python evaluate.py (default demo)": [sys.executable, str(REPO / "evaluate.py"), *common],
            f"python evaluate.py upstream={args.upstream}": [
                sys.executable, str(REPO / "evaluate.py"), f"upstream={args.upstream}", "bias_test=demo_accent",
                "speat.per_layer=false", *common],
        }
        floor = [sys.executable, "-c", "import torch, pytorch_lightning, transformers"]
        if args.only:
            commands = dict([list(commands.items())[0 if args.only == "demo" else 1]])
        for name, cmd in commands.items():
            run([*cmd, f"hydra.run.dir={tmp / 'fill'}"], ours, tmp)  # fill the cache (both checkouts share it)
            results = {"reference": [], "this checkout": [], "import-only floor": []}
            for rep in range(args.repeats):
                for label, src in (("reference", args.reference), ("this checkout", ours)):
                    results[label].append(run([*cmd, f"hydra.run.dir={tmp / label.replace(' ', '_') / str(rep)}",
                                               "force=true"], src, tmp))
                results["import-only floor"].append(run(floor, ours, tmp))
            print(f"\n{name} (warm, every clip cached), best of {args.repeats}:")
            for label, values in results.items():
                print(f"  every run, {label}: " + ", ".join(f"{w:.2f} s / {m:.0f} MiB" for w, m in values))
            best = {k: (min(w for w, _ in v), max(m for _, m in v)) for k, v in results.items()}
            for label, (wall, peak) in best.items():
                print(f"  {label:18s} {wall:6.2f} s   peak RSS {peak:7.0f} MiB")
            (w_ref, m_ref), (w_new, m_new), (w_floor, m_floor) = best.values()
            print(f"  ratio reference/this: wall {w_ref / w_new:.2f}x, peak memory {m_ref / m_new:.2f}x; "
                  f"this vs floor: peak memory {m_new / m_floor:.2f}x (goal <= 1.2), wall {w_new:.2f} s (goal <= 3 s)")
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
