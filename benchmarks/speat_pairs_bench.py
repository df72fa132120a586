"""The aggregation appendix from a warm cache: one SpEAT job of every (test, aggregation) pair vs. its
statistics' CPU time vs. the per-pair sweep (``-m``, one job per pair), side by side in one run.

Issue 33's goal: the list job costs at most 2x the CPU time of its statistics (today's per-pair sweep:
~100x). Reduced sizes (say so when quoting): one tiny random upstream (``tiny_wav2vec2``, 3 layers, no
weights), the two shipped demo tests (20 + 20 targets, 10 + 10 attributes) instead of the paper's six, and
every one of the 33 aggregations: 66 pairs. Settings as experiment=paper_aggregation: 10,000
permutations, no per-layer d, no SE curve; ``logger=none`` (W&B's start, ~1 s a run, would weigh on
both job kinds alike).

Measured, each from the same warm cache (a first list job fills it, not counted):

* list job: ``python evaluate.py 'bias_test=[...]' 'aggregation=[...]'`` (CPU time of the process, ``wait4``
  rusage, and wall time);
* statistics: in a fresh process, the same statistics from the same cached arrays: each pair's
  aggregation and permutation test (CPU time of that loop alone; reading the cache once is printed beside);
* per-pair sweep: ``python evaluate.py -m bias_test=a,b aggregation=x,y,...`` with the basic launcher
  (one process, every job in it; CPU and wall).

Usage: python benchmarks/speat_pairs_bench.py [--upstream tiny_wav2vec2] [--tests demo_voice,demo_accent]
       [--aggregations all|mean_sum,max_q3,...] [--permutations 10000] [--skip-sweep]
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
GOAL_RATIO = 2.0

# the statistics alone, in a fresh process: cached arrays read once, then each pair's aggregation and test
STATISTICS = r"""
import sys, time
import pandas as pd
from speechbias import stats
from speechbias.aggregation import aggregations_named
from speechbias.features.cache import FeatureCache
from speechbias.features.cached_statistics import fully_cached_statistics
from speechbias.roles import split_roles
from speechbias.upstream.deferred import DeferredUpstream
from hydra import compose, initialize_config_dir
from speechbias.launch.entry import register_project_root
from speechbias.run_context import register_choice_resolver

repo, cache_dir, upstream, tests, aggs, n_perm = sys.argv[1:7]
register_project_root(repo)
register_choice_resolver()
with initialize_config_dir(config_dir=repo + "/conf", version_base="1.3"):
    cfg = compose("evaluate", overrides=[f"upstream={upstream}"])
from omegaconf import OmegaConf
fingerprint = DeferredUpstream(OmegaConf.to_container(cfg.upstream)).fingerprint
manifests = {t: pd.read_csv(f"{repo}/experiments/demo/{t}.csv") for t in tests.split(",")}
for m in manifests.values():
    m["path"] = [str((__import__("pathlib").Path(repo) / "experiments/demo" / p).resolve()) for p in m["path"]]
paths = list(dict.fromkeys(p for m in manifests.values() for p in m["path"]))
t0 = time.process_time()
statistics = fully_cached_statistics(paths, FeatureCache(cache_dir), fingerprint)
read = time.process_time() - t0
assert statistics is not None, "cache not warm"
row = {p: i for i, p in enumerate(paths)}
t0 = time.process_time()
for test, m in manifests.items():
    part = statistics.rows([row[p] for p in m["path"]])
    roles = m["role"].to_numpy()
    for agg in aggregations_named(aggs.split(",")):
        parts = split_roles(agg(part.stat(agg.temporal)), roles)
        stats.speat(parts["X"], parts["Y"], parts["A"], parts["B"], n_permutations=int(n_perm), seed=0)
print(f"STATISTICS {time.process_time() - t0:.4f} {read:.4f}")
"""


def child_cpu(command: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """(CPU seconds of the child and its children, wall seconds, output) of one command."""
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stderr[-3000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return cpu, wall, proc.stdout + proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", default="tiny_wav2vec2")
    parser.add_argument("--tests", default="demo_voice,demo_accent")
    parser.add_argument("--aggregations", default="all", help="all (the 33) or a comma-separated list")
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--skip-sweep", action="store_true", help="no per-pair sweep (the slow column)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from speechbias.aggregation import LAYER_CHOICES, TEMPORAL

    aggs = [f"{t}_{lay}" for t in TEMPORAL for lay in LAYER_CHOICES] if args.aggregations == "all" else None
    aggs = aggs or args.aggregations.split(",")
    tests = args.tests.split(",")
    n_pairs = len(aggs) * len(tests)
    work = Path(tempfile.mkdtemp(prefix="speat_pairs_bench-"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(work / "cache"))
    env.pop("HYDRA_FULL_ERROR", None)
    settings = [
        f"upstream={args.upstream}",
        f"speat.n_permutations={args.permutations}",
        "speat.per_layer=false",
        "speat.se_curve=false",
        "logger=none",
    ]
    lists = [f"bias_test=[{','.join(tests)}]", f"aggregation=[{','.join(aggs)}]"]
    evaluate = [sys.executable, str(REPO / "evaluate.py")]
    print(f"{args.upstream}, {len(tests)} tests x {len(aggs)} aggregations = {n_pairs} pairs, "
          f"{args.permutations:,} permutations; warming the cache ...", flush=True)  # fmt: skip
    child_cpu([*evaluate, *lists, *settings, f"hydra.run.dir={work / 'warm'}"], env, work)

    rows = []
    cpu, wall, out = child_cpu([*evaluate, *lists, *settings, f"hydra.run.dir={work / 'list'}"], env, work)
    assert "read once for" in out, out[-2000:]
    rows.append(("list job (1 process)", cpu, wall))
    one = [f"bias_test=[{tests[0]}]", f"aggregation=[{aggs[0]}]"]
    floor_cpu, floor_wall, _ = child_cpu([*evaluate, *one, *settings, f"hydra.run.dir={work / 'one'}"], env, work)
    rows.append(("  the same job of 1 pair (start-up)", floor_cpu, floor_wall))
    command = [sys.executable, "-c", STATISTICS, str(REPO), str(work / "cache"), args.upstream, ",".join(tests)]
    _, _, out = child_cpu([*command, ",".join(aggs), str(args.permutations)], env, work)
    statistics, read = map(float, next(ln for ln in out.splitlines() if ln.startswith("STATISTICS")).split()[1:])
    rows.append(("statistics (aggregate + test)", statistics, float("nan")))
    rows.append(("  cache read of every clip, once", read, float("nan")))
    if not args.skip_sweep:
        sweep = [
            *evaluate,
            "-m",
            f"bias_test={','.join(tests)}",
            f"aggregation={','.join(aggs)}",
            *settings,
            f"hydra.sweep.dir={work / 'sweep'}",
        ]
        cpu, wall, _ = child_cpu(sweep, env, work)
        rows.append((f"per-pair sweep (-m, {n_pairs} jobs)", cpu, wall))

    print(f"\n{'':38} {'CPU s':>8} {'wall s':>8}")
    for name, cpu, wall in rows:
        print(f"{name:38} {cpu:8.2f} {wall:8.2f}")
    list_cpu = rows[0][1]
    ratio = list_cpu / statistics if statistics > 0 else float("inf")
    print(
        f"\nlist job / statistics CPU: {ratio:.2f}x (goal <= {GOAL_RATIO}x: {'met' if ratio <= GOAL_RATIO else 'NOT met'})"
    )
    print(f"list job CPU per pair: {list_cpu / n_pairs * 1000:.1f} ms; beyond start-up (each further pair): "
          f"{(list_cpu - floor_cpu) / max(n_pairs - 1, 1) * 1000:.1f} ms vs. its statistics "
          f"{statistics / n_pairs * 1000:.1f} ms: {(list_cpu - floor_cpu) / max(statistics, 1e-9):.2f}x")  # fmt: skip
    if not args.skip_sweep:
        sweep_cpu, sweep_wall = rows[-1][1], rows[-1][2]
        print(f"per-pair sweep / list job: {sweep_cpu / list_cpu:.1f}x CPU, {sweep_wall / rows[0][2]:.1f}x wall")
        print(f"per-pair sweep / statistics CPU: {sweep_cpu / statistics:.1f}x")
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; outputs in {work}")


if __name__ == "__main__":
    main()
