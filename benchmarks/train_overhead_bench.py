"""The fixed overhead of a warm ``python train.py`` of the paper's size, this checkout vs. a reference
checkout, side by side in one run, per phase.

Goal (issue 23): ``python train.py 'lr=[1e-3,1e-4,1e-5]' ser_data=mess`` on a warm cache of the paper's size
(1,800 clips, 25 x 1024 per-layer means, 20,000 steps of three heads) in <= 60 s for the whole process on
2 cores. This measures what is outside the fit: the same command with ``max_steps=1`` (the fit is then
~2 s). The workload (``ser_train_workload.write_cached_workload``, ~15 s, ~560 MB) is written once and
shared; each checkout runs its own ``train.py``, ``conf/`` and package, alternating, ``--repeats`` times.

Per run: wall time and peak RSS of the child (``ru_maxrss``), and its phases from the run folder's file
times and train.log: compose (start -> .hydra/), imports + checks (-> config.yaml), instantiate + extraction
(-> train.log's "needed an upstream forward"), fit (-> checkpoints/best.ckpt), propagation outputs and
figures (-> report.md), W&B + train.log (-> the last file written), exit (-> the process ended).
Then, once per checkout, the same command with ``--steps`` steps (default 200), and every file of the two
run folders compared byte for byte, but for what differs by nature: W&B's folder, .hydra/ (the run folder's
path), train.log and job_status.json (times); the paths of the checkout and of the run folder are replaced by
placeholders (predictions.csv names the demo clips under each checkout, run_digest.json its conf/ folder) and a
checkpoint is compared as its zip members (the zip's one folder is named after its temporary file);
run_digest.json without its digest (a hash of the fields compared, paths included).

Usage: python benchmarks/train_overhead_bench.py --reference /tmp/main_checkout [--repeats 3] [--workload DIR]
(a reference checkout: e.g. ``git archive main | tar -x -C /tmp/main_checkout``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from ser_train_workload import write_cached_workload  # noqa: E402

PHASES = ("compose", "imports+checks", "instantiate+extraction", "fit", "outputs+figures", "W&B+log", "exit")
# files that differ between two runs of the same config by nature (times, the run folder's own path)
NOT_COMPARED = ("wandb/", ".hydra/", "train.log", "job_status.json")
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def run(root: Path, overrides: list[str], run_dir: Path) -> tuple[float, float, dict[str, float]]:
    """(wall s, peak RSS MiB, phase seconds) of ``root``'s train.py with ``overrides`` into ``run_dir``."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    cmd = [sys.executable, str(root / "train.py"), *overrides, f"hydra.run.dir={run_dir}"]
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    end = time.time()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({root}): {' '.join(cmd)}\n{stderr[-3000:]}")
    return end - start, usage.ru_maxrss / 1024, phases(run_dir, start, end)


def phases(run_dir: Path, start: float, end: float) -> dict[str, float]:
    """Seconds of each phase of :data:`PHASES` from the run folder's file times."""
    mtime = lambda name: (run_dir / name).stat().st_mtime  # noqa: E731
    extracted = None
    for line in (run_dir / "train.log").read_text().splitlines():
        m = LOG_TIME.match(line)
        if m and "needed an upstream forward" in line:
            extracted = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    last = max(p.stat().st_mtime for p in run_dir.rglob("*") if p.is_file())
    marks = [
        start,
        mtime(".hydra/config.yaml"),
        mtime("config.yaml"),
        extracted,
        mtime("checkpoints/best.ckpt"),
        mtime("report.md"),
        last,
        end,
    ]
    return {name: b - a for name, a, b in zip(PHASES, marks, marks[1:])}


def comparable(path: Path, names: dict[str, str]) -> bytes:
    """A run file's bytes with what names its checkout and its run folder (``names``: text -> placeholder)
    replaced; a checkpoint (a zip whose one folder is named after the temporary file it was written to)
    as its members' contents."""
    if path.suffix == ".ckpt":
        with zipfile.ZipFile(path) as z:
            return b"".join(
                n.split("/", 1)[-1].encode() + z.read(n)
                for n in sorted(z.namelist(), key=lambda n: n.split("/", 1)[-1])
            )
    data = path.read_bytes()
    for text, placeholder in names.items():
        data = data.replace(text.encode(), placeholder.encode())
    if path.name == "run_digest.json":  # its digest hashes the paths too; the fields it hashes are compared
        record = json.loads(data)
        record.pop("digest", None)
        data = json.dumps(record, sort_keys=True).encode()
    return data


def compare_folders(
    a: Path, b: Path, names_a: dict[str, str], names_b: dict[str, str]
) -> tuple[list[str], list[str], list[str]]:
    """(identical, differing, present in one only) relative file names of run folders ``a`` and ``b``,
    compared as :func:`comparable` gives them."""

    def files(root: Path) -> set[str]:
        return {
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not any(str(p.relative_to(root)).startswith(n) for n in NOT_COMPARED)
        }

    fa, fb = files(a), files(b)
    same = sorted(n for n in fa & fb if comparable(a / n, names_a) == comparable(b / n, names_b))
    differ = sorted(n for n in fa & fb if n not in same)
    return same, differ, sorted(fa ^ fb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, required=True, help="the reference checkout (its root)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200, help="max_steps of the runs whose files are compared")
    ap.add_argument("--workload", type=Path, help="a folder holding the workload (written when empty)")
    args = ap.parse_args()
    ours, reference = REPO, args.reference.resolve()
    print(f"{os.cpu_count()} cores; before: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        workload = args.workload or tmp / "workload"
        t = time.time()
        overrides = write_cached_workload(workload)
        print(f"workload ready in {time.time() - t:.1f} s: {' '.join(overrides)}")
        results: dict[str, list] = {"reference": [], "this checkout": []}
        loads = []
        for rep in range(args.repeats):
            for label, root in (("reference", reference), ("this checkout", ours)):
                loads.append(os.getloadavg()[0])
                results[label].append(run(root, [*overrides, "max_steps=1"], tmp / "runs" / f"{label[:4]}{rep}"))
        print(
            f"\nfixed overhead (max_steps=1), {args.repeats} alternating rounds; 1-min load average before each "
            f"run: {', '.join(f'{v:.2f}' for v in loads)}"
        )
        print(f"  {'':14s} {'wall':>6s} {'RSS MiB':>8s}  " + " ".join(f"{p[:13]:>13s}" for p in PHASES))
        medians = {}
        for label, runs in results.items():
            for wall, rss, ph in runs:
                print(f"  {label:14s} {wall:6.2f} {rss:8.0f}  " + " ".join(f"{ph[p]:13.2f}" for p in PHASES))
            med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
            medians[label] = (
                med([w for w, _, _ in runs]),
                med([r for _, r, _ in runs]),
                {p: med([ph[p] for _, _, ph in runs]) for p in PHASES},
            )
        for label, (wall, rss, ph) in medians.items():
            print(f"  median {label:7s} {wall:6.2f} {rss:8.0f}  " + " ".join(f"{ph[p]:13.2f}" for p in PHASES))
        (w_ref, m_ref, p_ref), (w_new, m_new, p_new) = medians.values()
        print(
            f"  ratio reference/this (medians): wall {w_ref / w_new:.2f}x ({w_ref - w_new:+.2f} s), "
            f"peak RSS {m_ref / m_new:.2f}x; per phase: "
            + ", ".join(f"{p} {p_ref[p] - p_new[p]:+.2f} s" for p in PHASES)
        )
        print(f"\nsame results? max_steps={args.steps}, one run per checkout")
        folders = {}
        for label, root in (("reference", reference), ("this checkout", ours)):
            folders[label] = tmp / "compare" / label.replace(" ", "_")
            wall, rss, _ = run(root, [*overrides, f"max_steps={args.steps}"], folders[label])
            print(f"  {label}: {wall:.2f} s, {rss:.0f} MiB")
        same, differ, alone = compare_folders(
            folders["reference"],
            folders["this checkout"],
            {str(folders["reference"]): "<run>", str(reference): "<checkout>"},
            {str(folders["this checkout"]): "<run>", str(ours): "<checkout>"},
        )
        print(f"  identical ({len(same)}): {', '.join(same)}")
        print(f"  DIFFER ({len(differ)}): {', '.join(differ) or '-'}; in one folder only: {', '.join(alone) or '-'}")
        print(
            f"  not compared: {', '.join(NOT_COMPARED)}; compared with each run's folder and checkout path "
            "replaced by a placeholder, a checkpoint as its zip members (the zip's folder is the temporary "
            "file's name)"
        )
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
