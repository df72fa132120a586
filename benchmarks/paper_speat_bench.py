"""``experiment=paper_speat`` from a warm cache as 16 jobs vs. its statistics' CPU time, side by side in one run.

Issue 33's goal: the 16 jobs (one per model, each the six U.S. tests from one cache read) cost at most 1.5x
the CPU time of their statistics. Reduced sizes (say so when quoting): the paper's 16 models are replaced by
16 tiny random wav2vec2 upstreams (``tiny_wav2vec2``, 32 wide, seeds 0-15) with the paper models' layer
counts (12, 24, 24, 12, 24, 48, 12, 12, 24, 6, 6, 12, 12, 24, 24, 32 transformer blocks: wav2vec2 base,
large, large-lv60, HuBERT base, large, XL, WavLM base, base+, large, Whisper base, base.en, small, small.en,
medium, medium.en, large), and the six U.S. tests by six synthetic tests of the paper's sizes (60 clips per
target role, one set of 40 per attribute role shared by the six, 1-s noise clips; as
``speat_pairs_bench.py --paper-sizes``). The settings are paper_speat's: mean_sum, 10^6 permutations for d,
d at every layer (``speat.per_layer=true``), no SE curve; ``logger=none``.

Measured, each from the same warm cache (filled by a first pass, not counted; the upstream is the config's
HF model, so each job reads its fingerprint from the config and the model's files and imports no torch):

* 16 processes: each model's ``python evaluate.py 'bias_test=[six tests]' upstream=...`` as its own process
  (a SLURM array task each), CPU time summed over the 16 (``wait4`` rusage) and wall;
* the sweep: ``python evaluate.py -m 'bias_test=[six tests]' upstream=<the 16>`` with the basic launcher
  (experiment=paper_speat's "one job after another": 16 jobs in one process), CPU and wall;
* statistics: in one fresh process per model, the same statistics from the same cached arrays: each test's
  aggregation, permutation test and per-layer tests (:func:`speechbias.speat.optional_statistics.speat_by_layer`),
  the CPU time of those calls alone (reading the cache once is printed beside);
* the floors: what the jobs cannot skip whatever the project's code does, from parts measured in a fresh
  process (``speat_pairs_bench.FLOORS``): the imports of a job and Hydra's composes of its config (two
  before a job runs; in a ``-m`` sweep, two at its start and two a job: the basic sweeper's validation and
  the launcher's), pyplot's import, one layer figure per test (drawn and saved, at the model's layer
  count), the cache reads and the statistics. A goal below its floor cannot be met by this design (a
  Hydra job that writes the per-test figures the issue asks for).

Usage: python benchmarks/paper_speat_bench.py [--models 16] [--targets 60] [--attributes 40]
       [--permutations 1000000] [--work DIR (reuse its clips and cache)]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speat_pairs_bench import CACHED_STATISTICS, child_cpu, floors, paper_sized_tests  # noqa: E402

GOAL_RATIO = 1.5
# transformer blocks of the paper's 16 models, in experiment=paper_speat's order
PAPER_BLOCKS = (12, 24, 24, 12, 24, 48, 12, 12, 24, 6, 6, 12, 12, 24, 24, 32)

# the statistics alone: each test's aggregation, permutation test and per-layer tests (argv rest: permutations)
STATISTICS = (
    CACHED_STATISTICS
    + r"""
from speechbias.speat.optional_statistics import speat_by_layer
from speechbias.speat.settings import PER_LAYER_PERMUTATIONS

(n_perm,) = rest
(agg,) = aggregations_named(["mean_sum"])
n_perm = int(n_perm)
t0 = time.process_time()
for test, m in manifests.items():
    part = statistics.rows([row[p] for p in m["path"]])
    roles = m["role"].to_numpy()
    per_layer = part.stat(agg.temporal)
    parts = split_roles(agg(per_layer), roles)
    stats.speat(parts["X"], parts["Y"], parts["A"], parts["B"], n_permutations=n_perm, seed=0)
    speat_by_layer(per_layer, roles, min(n_perm, PER_LAYER_PERMUTATIONS), 0)
print(f"STATISTICS {time.process_time() - t0:.4f} {read:.4f}")
"""
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=16, help="the first N of the 16 paper models' layer counts")
    parser.add_argument("--targets", type=int, default=60, help="clips per target role")
    parser.add_argument("--attributes", type=int, default=40, help="clips per attribute role")
    parser.add_argument("--permutations", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, help="a previous run's folder: its clips, conf and cache reused")
    args = parser.parse_args()

    if args.work and (args.work / "manifests.json").is_file():
        work = args.work.resolve()
        manifests = json.loads((work / "manifests.json").read_text())
        conf = work / "conf"
    else:
        work = (args.work or Path(tempfile.mkdtemp(prefix="paper_speat_bench-"))).resolve()
        work.mkdir(parents=True, exist_ok=True)
        manifests, conf = paper_sized_tests(work, 6, args.targets, args.attributes)
        (work / "manifests.json").write_text(json.dumps(manifests))
    cache = work / "cache"
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(cache))
    env.pop("HYDRA_FULL_ERROR", None)
    tests = f"bias_test=[{','.join(manifests)}]"
    settings = [
        "aggregation=mean_sum",
        f"speat.n_permutations={args.permutations}",
        "speat.per_layer=true",
        "speat.se_curve=false",
        "logger=none",
    ]
    import yaml

    tiny = yaml.safe_load((REPO / "conf/upstream/tiny_wav2vec2.yaml").read_text())
    names = []
    for seed, blocks in enumerate(PAPER_BLOCKS[: args.models]):  # one upstream option per model
        names.append(f"bench_tiny_{seed:02d}")
        node = {**tiny, "seed": seed, "display_name": f"tiny-{blocks}-blocks-{seed}"}
        node["config"] = {**tiny["config"], "num_hidden_layers": blocks}
        (conf / "upstream" / f"{names[-1]}.yaml").write_text(yaml.safe_dump(node, sort_keys=False))
    models = [[f"upstream={name}"] for name in names]
    evaluate = [sys.executable, str(REPO / "evaluate.py"), "--config-path", str(conf)]
    print(
        f"{len(models)} tiny models (blocks {','.join(str(b) for b in PAPER_BLOCKS[: args.models])}) x 6 "
        f"paper-sized tests, {args.permutations:,} permutations, d per layer; warming the cache ...",
        flush=True,
    )
    for i, model in enumerate(models):
        child_cpu([*evaluate, tests, *model, *settings, f"hydra.run.dir={work / 'warm' / str(i)}"], env, work)

    for done in ("jobs", "sweep"):  # a reused work folder: its measured runs are run again, not skipped
        shutil.rmtree(work / done, ignore_errors=True)
    jobs_cpu = jobs_wall = 0.0
    per_job = []
    for i, model in enumerate(models):
        run_dir = work / "jobs" / str(i)
        cpu, wall, out = child_cpu([*evaluate, tests, *model, *settings, f"hydra.run.dir={run_dir}"], env, work)
        assert "0 of" in out and "needed an upstream forward" in out, out[-2000:]
        jobs_cpu, jobs_wall = jobs_cpu + cpu, jobs_wall + wall
        per_job.append(cpu)
    sweep = [*evaluate, "-m", tests, f"upstream={','.join(names)}", *settings, f"hydra.sweep.dir={work / 'sweep'}"]
    sweep_cpu, sweep_wall, out = child_cpu(sweep, env, work)
    assert out.count("needed an upstream forward") == len(models), out[-2000:]
    statistics = read = 0.0
    for model in models:
        command = [sys.executable, "-c", STATISTICS, str(REPO), str(conf), str(cache), json.dumps(model)]
        _, _, out = child_cpu([*command, json.dumps(manifests), str(args.permutations)], env, work)
        s, r = map(float, next(ln for ln in out.splitlines() if ln.startswith("STATISTICS")).split()[1:])
        statistics, read = statistics + s, read + r

    # what the jobs cannot skip (FLOORS): imports, Hydra's composes, pyplot's import, six figures a job (one per
    # test, of the model's layers), the cache reads and the statistics
    layer_counts = [blocks + 1 for blocks in PAPER_BLOCKS[: args.models]]
    found = floors(conf, [tests, *models[0], *settings], layer_counts, env, work)
    figures = sum(6 * found["figure"][n] for n in layer_counts)
    start = found["imports"] + found["first_compose"] + found["compose"]
    jobs_floor = len(models) * (start + found["matplotlib"]) + figures + read + statistics
    # the sweep: one start (get_mode, then multirun's compose), then per job the basic sweeper's validation
    # compose and the launcher's compose
    sweep_floor = start + found["matplotlib"] + len(models) * 2 * found["compose"] + figures + read + statistics

    print(f"\n{'':40} {'CPU s':>8} {'wall s':>8}")
    print(f"{f'{len(models)} jobs (one process each)':40} {jobs_cpu:8.2f} {jobs_wall:8.2f}")
    print(f"{'  per job: least / most':40} {min(per_job):8.2f} {max(per_job):8.2f}")
    print(f"{f'-m sweep of the {len(models)} (basic launcher)':40} {sweep_cpu:8.2f} {sweep_wall:8.2f}")
    print(f"{'statistics (aggregate + test + layers)':40} {statistics:8.2f} {'nan':>8}")
    print(f"{'  cache reads, once per model':40} {read:8.2f} {'nan':>8}")
    print(f"{'floor of the 16 processes':40} {jobs_floor:8.2f} {'nan':>8}")
    print(f"{'floor of the -m sweep':40} {sweep_floor:8.2f} {'nan':>8}")
    print(
        f"  floor parts: imports {found['imports']:.2f} + Hydra's composes {found['first_compose']:.2f} + "
        f"{found['compose']:.2f} a start, {found['compose']:.2f} each further; pyplot import "
        f"{found['matplotlib']:.2f}; figures {figures:.2f} (per figure "
        + ", ".join(f"{n} layers {v * 1000:.0f} ms" for n, v in sorted(found["figure"].items()))
        + ")"
    )
    print()
    for name, floor in ((f"{len(models)} processes", jobs_floor), ("-m sweep", sweep_floor)):
        print(f"floor of the {name} / statistics CPU: {floor / statistics:.2f}x (goal <= {GOAL_RATIO}x: "
              f"{'reachable' if floor / statistics <= GOAL_RATIO else 'below the floor'})")  # fmt: skip
    for name, cpu in ((f"{len(models)} processes", jobs_cpu), ("-m sweep", sweep_cpu)):
        ratio = cpu / statistics
        verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
        print(f"{name} / statistics CPU: {ratio:.2f}x (goal <= {GOAL_RATIO}x: {verdict}); "
              f"beyond the statistics {(cpu - statistics) / len(models):.2f} CPU-s a job")  # fmt: skip
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; outputs in {work}")


if __name__ == "__main__":
    main()
