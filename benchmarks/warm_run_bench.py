"""Warm runs (every clip cached): wall time and peak memory of ``python evaluate.py``, this checkout vs. a
reference checkout, side by side in one run.

Goals (issue 23): a warm ``python evaluate.py`` (the offline default: SpEAT of demo_voice on fbank, W&B
offline) takes <= 3 s; a warm run builds and loads no model, its peak memory within 1.2x of a process that
only imports the libraries it needs (the floor printed). Each command first runs once per checkout to fill a
shared feature cache (the two may key it differently), then ``--repeats`` times per checkout, interleaved
(drifting machine load hits both alike), each checkout running its own ``evaluate.py``, ``conf/`` and
package on this checkout's demo files
(``paths.root_dir``), so both read the same audio index and cache. Printed: the best wall time, the
peak RSS (``ru_maxrss`` of the child), the load average, the ratios, and whether the two checkouts wrote
the same results files.

Usage: python benchmarks/warm_run_bench.py [--reference /work/main/src] [--repeats 3] [--only demo|upstream]
[--override logger=none ...] (``--override``: a further override of both commands and checkouts, e.g. the
issue 41 goal's ``logger=none``)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 3.0
GOAL_MEMORY_RATIO = 1.2
# the files that say what a run computed (config.yaml differs where the checkouts' conf/ differ)
RESULT_FILES = ("results.csv", "results.json", "layers.csv", "layers.json", "report.md", "tracker_log.jsonl")
# what a warm run cannot do without: the floor of each command
FLOOR_IMPORTS = {
    "demo": "import numpy, pandas, hydra, omegaconf, safetensors, wandb",
    "upstream": "import numpy, pandas, hydra, omegaconf, safetensors, wandb, torch, transformers",
}


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def checkout_root(path: Path) -> Path:
    """The checkout of ``path`` (its root, or its ``src`` folder)."""
    path = path.resolve()
    return path.parent if path.name == "src" else path


def run(cmd: list[str], root: Path, cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds: user + system) of one child process with ``root/src``
    first on PYTHONPATH. On a loaded machine the CPU time is what the wall time would be on a quiet one
    (the run is one thread but for its short-lived helpers: BLAS, the W&B service)."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({root}): {' '.join(cmd)}\n{stderr[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def same_results(a: Path, b: Path) -> str:
    """Which result files of run folders ``a`` and ``b`` are byte-identical."""
    names = [n for n in RESULT_FILES if (a / n).is_file() or (b / n).is_file()]
    differ = [
        n
        for n in names
        if not ((a / n).is_file() and (b / n).is_file() and (a / n).read_bytes() == (b / n).read_bytes())
    ]
    return f"all {len(names)} identical ({', '.join(names)})" if not differ else f"DIFFER: {', '.join(differ)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reference",
        type=Path,
        default=Path("/work/main/src"),
        help="the reference checkout (its root or its src folder)",
    )
    ap.add_argument("--upstream", default="random_wav2vec2_base", help="the second command's upstream")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["demo", "upstream"], help="one of the two commands")
    ap.add_argument("--override", action="append", default=[], help="a further override of every command (repeatable)")
    args = ap.parse_args()
    ours, reference = REPO, checkout_root(args.reference)
    print(f"{os.cpu_count()} cores; before: {load()}")
    print(
        f"goals (issue 23): warm `python evaluate.py` <= {GOAL_SECONDS:g} s; warm runs build no model, "
        f"peak memory <= {GOAL_MEMORY_RATIO:g}x the import-only floor"
    )
    print(f"this checkout: {ours}; reference: {reference}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        common = [f"paths.root_dir={ours}", f"paths.cache_dir={tmp / 'cache'}", *args.override]
        commands = {
            "demo": (
                " ".join(["python evaluate.py", *args.override])
                + " (demo_voice on fbank; W&B offline unless an override sets logger)",
                [],
            ),
            "upstream": (
                f"python evaluate.py upstream={args.upstream} bias_test=demo_accent speat.per_layer=false",
                [f"upstream={args.upstream}", "bias_test=demo_accent", "speat.per_layer=false"],
            ),
        }
        if args.only:
            commands = {args.only: commands[args.only]}
        for key, (title, overrides) in commands.items():

            def command(root: Path, run_dir: Path, overrides: list[str] = overrides) -> list[str]:
                return [sys.executable, str(root / "evaluate.py"), *overrides, *common, f"hydra.run.dir={run_dir}"]

            for label, root in (("reference", reference), ("this checkout", ours)):  # fill the shared cache: the
                run(command(root, tmp / key / "fill" / label.replace(" ", "_")), root, tmp)  # keys may differ
            floor = [sys.executable, "-c", FLOOR_IMPORTS[key]]
            results = {"reference": [], "this checkout": [], "import-only floor": []}
            loads = []
            for rep in range(args.repeats):
                loads.append(os.getloadavg()[0])
                for label, root in (("reference", reference), ("this checkout", ours)):
                    folder = tmp / key / label.replace(" ", "_") / str(rep)
                    results[label].append(run(command(root, folder), root, tmp))
                results["import-only floor"].append(run(floor, ours, tmp))
            print(
                f"\n{title}\n  warm (every clip cached), best of {args.repeats}; 1-min load average at each "
                f"round: {', '.join(f'{v:.2f}' for v in loads)}"
            )
            for label, values in results.items():
                print(
                    f"  every run, {label}: "
                    + ", ".join(f"{w:.2f} s ({c:.2f} s CPU) / {m:.0f} MiB" for w, m, c in values)
                )
            best = {
                k: (min(w for w, _, _ in v), max(m for _, m, _ in v), min(c for _, _, c in v))
                for k, v in results.items()
            }
            for label, (wall, peak, cpu) in best.items():
                print(f"  {label:18s} {wall:6.2f} s wall  {cpu:6.2f} s CPU   peak RSS {peak:7.0f} MiB")
            (w_ref, m_ref, c_ref), (w_new, m_new, c_new), (w_floor, m_floor, _) = best.values()
            goal = "met" if w_new <= GOAL_SECONDS else "NOT met"
            print(
                f"  ratio reference/this: wall {w_ref / w_new:.2f}x, CPU {c_ref / c_new:.2f}x, "
                f"peak memory {m_ref / m_new:.2f}x"
            )
            print(
                f"  this checkout: {w_new:.2f} s (goal <= {GOAL_SECONDS:g} s for the default: {goal}); peak memory "
                f"{m_new / m_floor:.2f}x the floor `{FLOOR_IMPORTS[key]}` (goal <= {GOAL_MEMORY_RATIO:g})"
            )
            print(
                f"  result files, reference vs this checkout: "
                f"{same_results(tmp / key / 'reference' / '0', tmp / key / 'this_checkout' / '0')}"
            )
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
