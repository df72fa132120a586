"""Where the seconds of one warm ``python evaluate.py`` go: imports, composing, checks, the cache, the
statistics, the files, the tracker. After one run that fills the cache, runs evaluate.py in a child
process (``runpy``) with timers around the steps of the checkout whose package is imported (this one,
or a reference: ``PYTHONPATH=<ref>/src``). The child prints its timers after every timed step, so the
table comes whatever way the run ends (``os._exit`` included); the whole child's wall and CPU time
(``resource.getrusage`` of the children) are measured from outside.

Usage: PYTHONPATH=src python benchmarks/warm_run_breakdown.py [--root <checkout whose evaluate.py runs>]
       [overrides...]  (default: the offline default run, W&B offline)
"""

from __future__ import annotations

import argparse
import functools
import json
import importlib
import importlib.abc
import importlib.util
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMERS_LINE = "WARM_RUN_TIMERS "  # the child's line of timers (JSON), printed after every timed step
HEAVY = ("torch", "pytorch_lightning", "transformers", "matplotlib", "wandb", "numba")
# (label, module, attribute path): timed where they exist in the imported checkout
STEPS = (
    ("hydra: compose the config (each time)", "hydra._internal.hydra", "Hydra.compose_config"),
    ("config checks", "speechbias.launch.config_checks", "check_config"),
    ("instantiate the task (collaborators)", "hydra.utils", "instantiate"),
    ("bias test manifest", "speechbias.stimuli.bias_test", "BiasTest.load"),
    ("Trainer construction", "speechbias.launch.lightning_trainer", "build_trainer"),
    ("extraction loop", "speechbias.features.extraction", "extract_statistics"),
    ("cache reads, warm path", "speechbias.features.cached_statistics", "fully_cached_statistics"),
    ("statistics: SpEAT d, p (run and per layer)", "speechbias.stats", "speat"),
    ("report files (tables, report.md)", "speechbias.report.speat_report", "write_speat_outputs"),
    ("tracker (W&B offline run)", "speechbias.report.tracker", "Tracker.publish"),
    ("run digest", "speechbias.tasks.run_markers", "record_run_digest"),
)


def timed(label: str, totals: dict, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] = totals.get(label, 0.0) + time.perf_counter() - start
            report(totals)

    return wrapper


def report(totals: dict) -> None:
    """The child's timers so far, the package it imported and the heavy modules loaded, as one line."""
    import speechbias

    state = {"totals": totals, "package": speechbias.__file__, "heavy": [m for m in HEAVY if m in sys.modules]}
    print(TIMERS_LINE + json.dumps(state), flush=True)


def patch(module, totals: dict) -> None:
    """Put the timers of :data:`STEPS` on ``module`` (just imported)."""
    for label, module_name, attribute in STEPS:
        if module.__name__ != module_name:
            continue
        owner, _, name = attribute.rpartition(".")
        holder = getattr(module, owner, None) if owner else module
        if holder is not None and hasattr(holder, name):
            setattr(holder, name, timed(label, totals, getattr(holder, name)))


class TimerFinder(importlib.abc.MetaPathFinder):
    """Patches the modules of :data:`STEPS` as they are imported, so nothing is imported early."""

    def __init__(self, totals: dict):
        self.totals = totals
        self.names = {module for _, module, _ in STEPS}

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module, totals = spec.loader.exec_module, self.totals

        def exec_and_patch(module):
            exec_module(module)
            patch(module, totals)

        spec.loader.exec_module = exec_and_patch
        return spec


def install_timers(totals: dict) -> None:
    for name in [m for _, m, _ in STEPS if m in sys.modules]:
        patch(sys.modules[name], totals)
    sys.meta_path.insert(0, TimerFinder(totals))


def child(root: Path, argv: list[str]) -> None:
    """The timed warm run: evaluate.py of ``root`` in this process, its timers printed as it goes."""
    totals: dict[str, float] = {}
    import speechbias  # noqa: F401  (whichever checkout PYTHONPATH names)

    install_timers(totals)
    sys.argv = [str(root / "evaluate.py"), *argv]
    try:
        runpy.run_path(str(root / "evaluate.py"), run_name="__main__")
    except SystemExit:
        pass
    report(totals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO, help="the checkout whose evaluate.py and conf/ run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args, overrides = ap.parse_known_args()
    if args.child:
        child(args.root, overrides)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "offline")
    with tempfile.TemporaryDirectory() as tmp:
        common = [f"paths.root_dir={REPO}", f"paths.cache_dir={tmp}/cache", *overrides]
        subprocess.run(
            [sys.executable, str(args.root / "evaluate.py"), *common, f"hydra.run.dir={tmp}/fill"],
            check=True,
            capture_output=True,
            env=dict(os.environ),
        )
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--child", "--root", str(args.root), *common, f"hydra.run.dir={tmp}/warm"],
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(TIMERS_LINE)]
    if proc.returncode != 0 or not lines:
        sys.exit(f"the warm run failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    state = json.loads(lines[-1][len(TIMERS_LINE) :])
    print(f"package: {state['package']}")
    print(
        f"warm run, the whole process (interpreter start included): {wall:.2f} s wall, {cpu:.2f} CPU-s; "
        f"load average after: {os.getloadavg()[0]:.2f}"
    )
    print("  heavy modules imported: " + (", ".join(state["heavy"]) or "none"))
    for label, seconds in state["totals"].items():
        print(f"  {label:42s} {seconds:6.2f} s wall")
    print("  (nested: instantiate includes the collaborators' imports; the tracker includes importing wandb)")


if __name__ == "__main__":
    main()
