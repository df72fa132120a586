"""Do two checkouts write the same SpEAT files? Each case as a user types it, run by a reference checkout and by
this one in the same run folder and feature cache folder (emptied where the case is cold), every file the run
wrote compared byte for byte.

Cases (issue 42 item 3: one SpEAT path from cache to results): a one-pair job cold then warm (the demo: fbank on
demo_voice, SE curve on), a list job of 2 tests x 2 aggregations cold then warm (tiny_wav2vec2), and a DDP job
(trainer=ddp_sim: 2 CPU processes) cold then warm (tiny_wav2vec2 on demo_accent). Printed per case: the files
that are identical, those that differ (and why they may: logs and job_status.json hold times and process ids),
and each checkout's n_upstream_forwards.

Usage: python benchmarks/speat_paths_identity.py --reference /path/to/old/checkout [--only one,list,ddp]
(the reference checkout's evaluate.py, conf/ and src/ run it; both read this checkout's demo clips)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["speat.n_permutations=2000", "logger=none", "trainer.enable_progress_bar=false"]
CASES = {
    "one": ["speat.se_curve=true", "speat.n_resamples=300"],
    "list": ["upstream=tiny_wav2vec2", "bias_test=[demo_voice,demo_accent]", "aggregation=[mean_sum,max_q3]"],
    "ddp": ["upstream=tiny_wav2vec2", "bias_test=demo_accent", "trainer=ddp_sim"],
}
# files whose bytes hold when or by which process a run ran, not what it computed
VOLATILE = ("job_status.json", ".log", ".speechbias.lock")


def evaluate(root: Path, run_dir: Path, cache: Path, overrides: list[str]) -> float:
    """``python <root>/evaluate.py`` with ``root/src`` first on PYTHONPATH, from a working folder beside the
    run folder (the same for both checkouts: Hydra records it); returns its wall seconds."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    cmd = [
        sys.executable,
        str(root / "evaluate.py"),
        *overrides,
        f"paths.root_dir={REPO}",
        f"paths.cache_dir={cache}",
        f"hydra.run.dir={run_dir}",
    ]
    start = time.perf_counter()
    cwd = run_dir.parent / "cwd"
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({root}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def same_but_checkout(old: bytes | None, new: bytes | None, checkouts: dict[str, Path]) -> bool:
    """Whether two files are the same once each checkout's folder is one placeholder and a run digest's
    ``"digest"`` line (a hash of the rest) is left out: Hydra and the digest record the conf/ folder."""
    if old is None or new is None:
        return False

    def plain(data: bytes, root: Path) -> list[bytes]:
        lines = data.replace(str(root / "conf").encode(), b"<checkout>/conf").splitlines()
        return [line for line in lines if not line.strip().startswith(b'"digest":')]

    return plain(old, checkouts["reference"]) == plain(new, checkouts["this checkout"])


def first_difference(old: bytes | None, new: bytes | None) -> str:
    """The first line that differs (reference -> this checkout), or which side lacks the file."""
    if old is None or new is None:
        return "only in " + ("this checkout" if old is None else "the reference")
    old_lines, new_lines = old.decode(errors="replace").splitlines(), new.decode(errors="replace").splitlines()
    changed = [f"{a.strip()[:150]!r} -> {b.strip()[:150]!r}" for a, b in zip(old_lines, new_lines) if a != b]
    return "; ".join(changed[:4]) or f"{len(old_lines)} vs {len(new_lines)} lines"


def forwards(folder: Path) -> list[int]:
    """n_upstream_forwards of every results.json under ``folder`` (a list job's job-level one left out)."""
    found = []
    for path in sorted(folder.rglob("results.json")):
        rows = json.loads(path.read_text())
        found += [r["n_upstream_forwards"] for r in rows if "n_upstream_forwards" in r and "pair_dir" not in r]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, required=True, help="the reference checkout's root")
    ap.add_argument("--only", default=",".join(CASES), help="a comma-separated subset of " + ",".join(CASES))
    args = ap.parse_args()
    checkouts = {"reference": args.reference.resolve(), "this checkout": REPO}
    print(f"reference: {checkouts['reference']}; this checkout: {REPO}")
    all_same = True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache, run_dir = tmp / "cache", tmp / "run"
        for case in args.only.split(","):
            kept: dict[str, dict[str, dict[str, bytes]]] = {}
            for label, root in checkouts.items():
                shutil.rmtree(cache, ignore_errors=True)
                for warmth in ("cold", "warm"):
                    seconds = evaluate(root, run_dir, cache, [*SMALL, *CASES[case]])
                    n = forwards(run_dir)
                    print(f"  {case} {warmth}, {label}: {seconds:.1f} s wall, n_upstream_forwards {n}")
                    kept.setdefault(warmth, {})[label] = files_of(run_dir)
                    shutil.rmtree(run_dir)
            for warmth, runs in kept.items():
                old, new = runs["reference"], runs["this checkout"]
                names = sorted(old.keys() | new.keys())
                differ = [n for n in names if old.get(n) != new.get(n)]
                volatile = [n for n in differ if n.endswith(VOLATILE)]
                where = [
                    n for n in differ if n not in volatile and same_but_checkout(old.get(n), new.get(n), checkouts)
                ]
                real = [n for n in differ if n not in volatile and n not in where]
                all_same &= not real
                print(
                    f"{case} {warmth}: {len(names) - len(differ)} of {len(names)} files byte-identical"
                    + (f"; differ (times, pids): {', '.join(volatile)}" if volatile else "")
                    + (
                        f"; differ by the checkout's conf/ folder (and its digest) only: {', '.join(where)}"
                        if where
                        else ""
                    )
                    + (f"; DIFFER: {', '.join(real)}" if real else "")
                )
                for name in real:
                    print(f"    {name}: {first_difference(old.get(name), new.get(name))}")
    print("every result file byte-identical" if all_same else "SOME RESULT FILES DIFFER")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()
