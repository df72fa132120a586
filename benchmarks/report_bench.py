"""``python evaluate.py task=report`` over the aggregation appendix's 180 pairs (one model x the 6 U.S. tests x
experiment=paper_aggregation's 30 aggregations, no SE curves), this checkout side by side with a reference
checkout's src (--reference-src, e.g. an older commit's ``git archive``), in rounds taken in turn.

The sweep is written once with made-up numbers (tests/sweep/fake_sweep.py: the run files as the SpEAT task
writes them; 180 one-pair folders). Each run is a fresh process as the user types it (``logger=none``); its
CPU time is the child's own (``wait4``), reported apart from its wall time: each one's least over the rounds.
Goal (issue 41): at most 3 CPU-s (8.5 before). The floor printed beside: a fresh interpreter importing what
the report of this sweep needs (pandas, which imports pyarrow for the Parquet table, and matplotlib's pyplot;
statsmodels' formula API only for the ANOVA, which one model does not allow), which no change of the
report's own code removes. With --reference-src the report folders' files (all but the run's bookkeeping:
config.yaml, evaluate.log, job_status.json, run_digest.json, .hydra/) are compared byte for byte.

Measured (issue 41, 3 rounds, side by side with 729d3fc's src, files identical): 2.95 CPU-s (5.8 s wall) vs
4.42 (8.0 s) at load ~5, 1.50x CPU; 3.07 vs 4.82 at ~6.3 (1.57x); with the option check that needs no Hydra
loader, 2.62-2.87 vs 4.42-4.44 at ~4.5 (1.55-1.69x). Of the 1.5 CPU-s cut: scipy no longer imported (the SER pooling's
Cohen's d was imported with the report's modules; ~1.0) and the run folders read with the csv module
(results/run_tables.py; collection 0.09-0.10 CPU-s vs 0.87-0.99). What remains (one process, load ~4):
imports ~0.9 (pandas, pyarrow, pyplot, hydra, numpy), Hydra's two composes 0.22, the checks 0.12, the
collection 0.12, the tables 0.1, the figures 1.1 (of which saving 4 PNGs at 200 dpi 0.85: matplotlib draws
each twice for the tight box).

Usage: python benchmarks/report_bench.py [--rounds 3] [--reference-src <checkout>/src]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import pandas, matplotlib.pyplot"
# the report's bookkeeping files, which differ from run to run: not compared with the reference's
BOOKKEEPING = {"config.yaml", "evaluate.log", "job_status.json", "run_digest.json", ".hydra", ".speechbias.lock"}


def write_sweep(root: Path) -> int:
    """The 180 runs of the fake appendix sweep under ``root``; their number."""
    import yaml

    sys.path.insert(0, str(REPO / "tests"))
    from sweep.fake_sweep import PAPER_MODELS, US_TESTS, write_speat_sweep

    node = yaml.safe_load((REPO / "conf/experiment/paper_aggregation.yaml").read_text())
    aggregations = node["hydra"]["sweeper"]["params"]["aggregation"].strip("[]").split(",")
    rows = write_speat_sweep(root, models=PAPER_MODELS[:1], tests=US_TESTS, aggregations=aggregations, se_curve=False)
    return len(rows)


def report_files(folder: Path) -> dict[str, bytes]:
    """The report folder's files but its bookkeeping, by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name not in BOOKKEEPING}


def child(args: list[str], src: Path) -> tuple[float, float]:
    """(wall s, CPU-s) of ``python <args>`` in the repository with speechbias from ``src``."""
    env = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference-src", type=Path, help="the src folder of a reference checkout")
    args = parser.parse_args()
    print(f"report bench, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep"
        print(f"sweep of {write_sweep(sweep)} SpEAT runs written")
        report = ["evaluate.py", "task=report", f"sweep_dir={sweep}", "logger=none"]
        runs = {"this checkout": (report, REPO / "src")}
        if args.reference_src:
            runs["reference " + str(args.reference_src)] = (report, args.reference_src.resolve())
        runs["floor: " + FLOOR] = (["-c", FLOOR], REPO / "src")
        best = {label: (math.inf, math.inf) for label in runs}
        files = {}
        for _ in range(args.rounds):  # every run once per round, in turn: a busy machine slows them alike
            for label, (command, src) in runs.items():
                wall, cpu = child(command, src)
                best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
                if command is report:
                    files[label] = report_files(sweep / "report")
        print(f"least over {args.rounds} rounds, wall and CPU each on its own:")
        for label, (wall, cpu) in best.items():
            print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} CPU-s")
        wall, cpu = best["this checkout"]
        print(f"goal: task=report at most 3 CPU-s: {cpu:.2f} CPU-s ({'met' if cpu <= 3 else 'MISSED'})")
        if args.reference_src:
            ref_wall, ref_cpu = best["reference " + str(args.reference_src)]
            print(f"ratio reference / this checkout: wall {ref_wall / wall:.2f}x, CPU {ref_cpu / cpu:.2f}x")
            mine, theirs = files["this checkout"], files["reference " + str(args.reference_src)]
            differ = sorted(n for n in mine.keys() | theirs.keys() if mine.get(n) != theirs.get(n))
            print(f"report files identical to the reference's: {not differ} ({len(mine)} files; differ: {differ})")


if __name__ == "__main__":
    main()
