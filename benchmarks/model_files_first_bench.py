"""Commands whose model's files are missing: wall and CPU seconds until their one-line error, this checkout vs.
a reference tree, side by side in one run.

Issue 39, item 4: ``python train.py upstream=hubert_xl lr=1e-4`` without weights in the Hugging Face cache,
``upstream=hf model_id=/missing/dir`` and ``upstream.randomize=true`` without the config took ~55 s under
load, because torch, transformers and Lightning were imported before the model's files were looked up; and
``python evaluate.py upstream=hubert_xl bias_test=female_male paths.data_root=/data/speat`` named the missing
data only. Each command runs offline with an empty ``HF_HOME`` (no model cached), ``--repeats`` times per
tree, interleaved (drifting machine load hits both alike), each tree running its own entry script, ``conf/``
and package. Printed: best wall and CPU seconds (user + system of the child), their ratios, whether each
error line names the model, and whether the process imported torch (``-X importtime``).

Usage: python benchmarks/model_files_first_bench.py [--reference-rev e9b6a27 | --reference <checkout>] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (script, overrides, the model id its line must name)
COMMANDS = (
    ("train.py", ["upstream=hubert_xl", "lr=1e-4"], "facebook/hubert-xlarge-ll60k"),
    ("train.py", ["upstream=hf", "model_id=/missing/dir"], "/missing/dir"),
    ("train.py", ["upstream=hubert_xl", "upstream.randomize=true"], "facebook/hubert-xlarge-ll60k"),
    (
        "evaluate.py",
        ["upstream=hubert_xl", "bias_test=female_male", "paths.data_root=/data/speat"],
        "facebook/hubert-xlarge-ll60k",
    ),
)
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", re.M)


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def run(root: Path, script: str, overrides: list[str], tmp: Path) -> tuple[float, float, str, bool]:
    """(wall s, CPU s, the error line, torch imported) of one command of the checkout at ``root``."""
    env = dict(
        os.environ,
        PYTHONPATH=str(root / "src"),
        HF_HUB_OFFLINE="1",
        WANDB_MODE="offline",
        HF_HOME=str(tmp / "empty_hf_home"),
    )
    env.pop("HYDRA_FULL_ERROR", None)
    command = [
        sys.executable,
        "-X",
        "importtime",
        str(root / script),
        *overrides,
        f"paths.output_root={tmp / 'outputs'}",
        f"paths.cache_dir={tmp / 'cache'}",
    ]
    before, start = os.times(), time.perf_counter()
    proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, os.times()  # the child's CPU time is added to ours once it is reaped
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and not ln.startswith("import time:")]
    torch = "torch" in {m.split(".")[0] for m in IMPORTED.findall(proc.stderr)}
    if proc.returncode != 1 or not lines:
        raise SystemExit(f"expected one error and exit 1 ({root}): {' '.join(command)}\n{proc.stderr[-2000:]}")
    return wall, cpu, lines[-1], torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reference-rev", default="e9b6a27", help="a revision of this repository, extracted to a temp folder"
    )
    ap.add_argument("--reference", type=Path, help="a checkout to compare with instead (its root)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; before: {load()}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        reference = args.reference
        if reference is None:
            reference = tmp / "reference"
            reference.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.reference_rev], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(reference)], input=archive.stdout, check=True)
        label_ref = f"reference ({args.reference_rev if args.reference is None else reference})"
        print(f"this checkout: {REPO}; {label_ref}")
        for script, overrides, model in COMMANDS:
            title = f"python {script} {' '.join(overrides)}"
            results: dict[str, list] = {label_ref: [], "this checkout": []}
            loads = []
            for _ in range(args.repeats):
                loads.append(os.getloadavg()[0])
                for label, root in ((label_ref, reference), ("this checkout", REPO)):
                    results[label].append(run(root, script, overrides, tmp))
            print(
                f"\n{title}\n  best of {args.repeats}; 1-min load at each round: {', '.join(f'{v:.2f}' for v in loads)}"
            )
            best = {}
            for label, values in results.items():
                wall, cpu = min(v[0] for v in values), min(v[1] for v in values)
                line, torch = values[-1][2], values[-1][3]
                best[label] = (wall, cpu)
                print(
                    f"  {label:26s} {wall:6.2f} s wall {cpu:6.2f} s CPU  torch imported: {'yes' if torch else 'no '}  "
                    f"names the model: {'yes' if model in line else 'NO'}  names the data: "
                    f"{'yes' if 'paths.data_root' in line else 'no'}"
                )
                print(f"    {line[:160]}{'...' if len(line) > 160 else ''}")
            (w_ref, c_ref), (w_new, c_new) = best.values()
            print(f"  ratio reference/this: wall {w_ref / w_new:.1f}x, CPU {c_ref / c_new:.1f}x")
    print(f"\nafter: {load()}")


if __name__ == "__main__":
    main()
