"""What "finished = every output verifies" costs a rerun, measured side by side on real run folders.

For each finished run folder (default: the offline demos, run first into a temporary folder with
``logger=none``: ``python evaluate.py`` (SpEAT) and ``python train.py`` (SER)), interleaved over repeats:

* presence: the old check (the task's marker files and ``run_digest.json`` exist);
* verify: :func:`speechbias.tasks.run_markers.finished_marker` (reads the digest, checks every recorded
  output's size and sha256, then the markers);
* record: :func:`speechbias.tasks.run_markers.output_files` (hashing every output once, what a finished
  run adds before its digest).

Prints the files, bytes, the best time of each in ms and the ratio verify/presence. The files stay in the
page cache (a rerun right after a run), the worst case for verification's share.
Usage: python benchmarks/run_verify_bench.py [--repeats 20] [FOLDER:TASK ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speechbias.tasks.run_markers import RUN_DIGEST_FILE, finished_marker, output_files, read_digest

REPO = Path(__file__).resolve().parents[1]


def demo_folders(base: Path) -> list[tuple[Path, str]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    runs = [("evaluate", "speat"), ("train", "train_ser")]
    out = []
    for script, task in runs:
        run = base / task
        cmd = [sys.executable, str(REPO / f"{script}.py"), "logger=none", f"hydra.run.dir={run}"]
        cmd.append(f"paths.cache_dir={base / 'cache'}")
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        out.append((run, task))
    return out


def best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * min(times)


def measure(run: Path, task: str, repeats: int) -> None:
    """Print one folder's figures (see the module docstring)."""
    files = (read_digest(run / RUN_DIGEST_FILE) or {}).get("files") or {}
    size = sum(f["size"] for f in files.values())
    marker = run / ("summary.json" if task == "spoken_stereoset" else "results.json")
    assert finished_marker(task, run) is not None, f"{run} is not a finished {task} run"
    checks = {
        "presence": lambda: marker.is_file() and (run / RUN_DIGEST_FILE).is_file(),
        "verify": lambda: finished_marker(task, run),
        "record": lambda: output_files(run),
    }
    timings = {k: [] for k in checks}
    for _ in range(repeats):  # interleaved, so load changes hit all three alike
        for name, check in checks.items():
            timings[name].append(best_ms(check, 1))
    best = {k: min(v) for k, v in timings.items()}
    print(
        f"{task}: {len(files)} outputs, {size / 1024:.0f} KiB; presence {best['presence']:.3f} ms, "
        f"verify {best['verify']:.3f} ms ({best['verify'] / best['presence']:.0f}x presence), "
        f"record {best['record']:.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("folders", nargs="*", help="FOLDER:TASK of finished runs (default: the two demos)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.folders:
            folders = [(Path(f.rsplit(":", 1)[0]), f.rsplit(":", 1)[1]) for f in args.folders]
        else:
            folders = demo_folders(Path(tmp))
        print(f"load average {os.getloadavg()[0]:.2f}")
        for run, task in folders:
            measure(run, task, args.repeats)
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
