"""How many jobs of a multirun each of its processes runs, told to the jobs (their statistics plan by it).

A multirun's jobs run in the sweep's own process one after another (Hydra's basic launcher), in a few
worker processes that take the jobs in turn (``hydra/launcher=parallel``: joblib/loky, ``n_jobs``
workers), or one per process (SLURM, any other launcher). :class:`SweepWorkloadCallback`
(``hydra.callbacks.sweep_workload`` of conf/evaluate.yaml) works the share out when the multirun
starts and exports it as :data:`JOBS_PER_PROCESS_ENV` (inherited by joblib workers, and by SLURM
jobs, whose share is 1); a job reads it with
:func:`jobs_per_process` (1 outside a multirun). A SpEAT job declares that many times its own
statistics work (:class:`speechbias.callbacks.speat_results.SpeatResults`), so a process of many tests
sets the compiled statistics kernels up before its first test (:mod:`speechbias.stats.kernel_choice`)
and a single run stays on numpy. The share counts finished jobs too (a resumed sweep skips them):
an overestimate costs at most numba's ~1 s set-up per process; it never changes a number.
"""

from __future__ import annotations

import math
import os

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

JOBS_PER_PROCESS_ENV = "SPEECHBIAS_JOBS_PER_PROCESS"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def share_of_jobs(n_jobs: int, launcher_target: str | None, n_workers: int | None = None) -> int:
    """Jobs each process of a sweep of ``n_jobs`` runs (at most) under the launcher ``launcher_target``:
    all of them (basic), ``ceil(n_jobs / workers)`` (joblib, ``n_workers`` as joblib reads ``n_jobs``:
    -1 one per CPU core, -2 all but one, ...), else 1."""
    if n_jobs <= 1:
        return 1
    if launcher_target == BASIC_LAUNCHER:
        return n_jobs
    if launcher_target == JOBLIB_LAUNCHER:
        cores = os.cpu_count() or 1
        workers = int(n_workers) if n_workers else 1
        workers = workers if workers > 0 else max(1, cores + 1 + workers)
        return math.ceil(n_jobs / workers)
    return 1


def jobs_per_process() -> int:
    """This process's share of its multirun's jobs (:data:`JOBS_PER_PROCESS_ENV`); 1 outside a multirun."""
    try:
        return max(1, int(os.environ.get(JOBS_PER_PROCESS_ENV, "1")))
    except ValueError:
        return 1


class SweepWorkloadCallback(Callback):
    """Hydra callback: exports this multirun's :func:`share_of_jobs` as :data:`JOBS_PER_PROCESS_ENV` for
    its jobs, and removes it when the multirun ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from speechbias.launch.sweep_preflight import sweep_jobs

        target = OmegaConf.select(config, "hydra.launcher._target_", default=None)
        n_workers = OmegaConf.select(config, "hydra.launcher.n_jobs", default=None)
        os.environ[JOBS_PER_PROCESS_ENV] = str(share_of_jobs(len(sweep_jobs(config)), target, n_workers))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        os.environ.pop(JOBS_PER_PROCESS_ENV, None)
