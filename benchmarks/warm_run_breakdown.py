"""Where the seconds of one warm ``python evaluate.py`` go: imports, composing, checks, the cache, the
statistics, the files, the tracker. Runs evaluate.py in this process (``runpy``) with timers around the
steps of the checkout whose package is imported (this one, or a reference: ``PYTHONPATH=<ref>/src``),
after one run that fills the cache.

Usage: PYTHONPATH=src python benchmarks/warm_run_breakdown.py [--root <checkout whose evaluate.py runs>]
       [overrides...]  (default: the offline default run, W&B offline)
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.abc
import importlib.util
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# (label, module, attribute path): timed where they exist in the imported checkout
STEPS = (
    ("hydra: compose the config (each time)", "hydra._internal.hydra", "Hydra.compose_config"),
    ("config checks", "speechbias.launch.config_checks", "check_config"),
    ("instantiate the task (collaborators)", "hydra.utils", "instantiate"),
    ("bias test manifest", "speechbias.stimuli.bias_test", "BiasTest.load"),
    ("Trainer construction", "speechbias.launch.lightning_trainer", "build_trainer"),
    ("extraction loop (incl. callback)", "speechbias.features.extraction", "extract_statistics"),
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

    return wrapper


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO, help="the checkout whose evaluate.py and conf/ run")
    args, overrides = ap.parse_known_args()
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
        totals: dict[str, float] = {}
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        import speechbias  # noqa: F401  (whichever checkout PYTHONPATH names)

        install_timers(totals)
        sys.argv = [str(args.root / "evaluate.py"), *common, f"hydra.run.dir={tmp}/warm"]
        start = time.perf_counter()
        try:
            runpy.run_path(str(args.root / "evaluate.py"), run_name="__main__")
        except SystemExit:
            pass
        wall = time.perf_counter() - start
    print(f"package: {speechbias.__file__}")
    print(
        f"warm run in-process: {wall:.2f} s (the interpreter's start not included); load average after: "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(
        "  heavy modules imported: "
        + ", ".join(
            m for m in ("torch", "pytorch_lightning", "transformers", "matplotlib", "wandb") if m in sys.modules
        )
    )
    for label, seconds in totals.items():
        print(f"  {label:42s} {seconds:6.2f} s")
    print("  (nested: instantiate includes the collaborators' imports; the tracker includes importing wandb)")


if __name__ == "__main__":
    main()
