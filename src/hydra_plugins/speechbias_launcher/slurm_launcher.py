"""``hydra/launcher=slurm``: hydra-submitit-launcher's SLURM launcher, made to report like the local ones.

Differences from ``submitit_slurm`` (everything else, and every setting, is the plugin's):

* before anything is submitted, a request no node of the partition can satisfy (GPUs on a partition
  without them, more CPUs or memory than its largest node, an unknown partition) stops the sweep
  with one line naming the setting (:func:`speechbias.launch.slurm.resources.resource_problem`), as does
  ``tasks_per_node > 1`` with a single-process trainer;
* ``srun --kill-on-bad-exit=1``: a rank that fails ends its whole job at once;
* the jobs are watched with ``squeue`` (submitit polls ``sacct``, which warns on every poll where
  the cluster keeps no accounting): a job pending longer than ``pending_report_s`` prints its SLURM
  reason; a requeued job (``scontrol requeue``, time limit) is waited for;
* a job that ends without a result (cancelled, timed out, killed, a failed rank) is recorded as
  failed in its folder's ``job_status.json`` with its reason, and the sweep still ends with its table
  (and exit 1) instead of a traceback.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf, open_dict

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

log = logging.getLogger(__name__)

KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"


class OnceFilter(logging.Filter):
    """Lets the first record containing ``text`` through and drops the rest (submitit's
    ``Bypassing sacct error`` comes on every poll where the cluster keeps no accounting)."""

    def __init__(self, text: str):
        super().__init__()
        self.text, self.seen = text, False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.text not in record.getMessage():
            return True
        if self.seen:
            return False
        self.seen = True
        return True


class SpeechbiasSlurmLauncher(SlurmLauncher):
    """See the module docstring. ``pending_report_s``: seconds of pending before a job's reason is
    printed; ``poll_s``: seconds between ``squeue`` calls; other keys: hydra-submitit-launcher's."""

    def __init__(
        self, pending_report_s: float = 60.0, poll_s: float = 2.0, srun_args: Sequence[str] | None = None, **params: Any
    ) -> None:
        srun = [
            str(a) for a in (OmegaConf.to_container(srun_args) if OmegaConf.is_config(srun_args) else srun_args or [])
        ]
        if not any(a.startswith("--kill-on-bad-exit") for a in srun):
            srun.append(KILL_ON_BAD_EXIT)
        super().__init__(srun_args=srun, **params)
        self.pending_report_s = float(pending_report_s)
        self.poll_s = float(poll_s)

    # -- before submission --------------------------------------------------------------------
    def check_request(self) -> str | None:
        """One line saying what cannot run (resources, ranks vs. trainer), or None."""
        import shutil

        from speechbias.launch.slurm.resources import cluster_partitions, resource_problem

        if shutil.which("sbatch") is None:
            return (
                "hydra/launcher=slurm needs SLURM's sbatch on PATH (run on the cluster's login node); "
                "on this machine use hydra/launcher=parallel"
            )
        problem = resource_problem(self.params, cluster_partitions())
        if problem:
            return problem
        tasks = int(self.params.get("tasks_per_node") or 1) * int(self.params.get("nodes") or 1)
        strategy = OmegaConf.select(self.config, "trainer.strategy", default=None) if self.config else None
        if (
            tasks > 1
            and self.config is not None
            and "trainer" in self.config
            and not (isinstance(strategy, str) and strategy.startswith("ddp"))
        ):
            return (
                f"hydra.launcher.tasks_per_node={self.params.get('tasks_per_node')} starts several ranks per job, "
                "but this trainer runs one process: add trainer=ddp (trainer.accelerator=cpu without GPUs), "
                "or set hydra.launcher.tasks_per_node=1"
            )
        return None

    # -- launch --------------------------------------------------------------------------------
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        assert self.config is not None
        problem = self.check_request()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(1)
        logging.getLogger("submitit").addFilter(OnceFilter("Bypassing sacct error"))
        executor = self._executor(submitit)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
        job_params = []
        for k, overrides in enumerate(job_overrides):
            idx = initial_job_idx + k
            log.info(f"\t#{idx} : {' '.join(overrides)}")
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", _singleton_state()))
        jobs = executor.map_array(self, *zip(*job_params))
        labels = {j.job_id: " ".join(o) for j, o in zip(jobs, job_overrides)}
        final = self.wait(jobs, labels)
        return [
            self._job_return(job, list(overrides), initial_job_idx + k, final.get(job.job_id))
            for k, (job, overrides) in enumerate(zip(jobs, job_overrides))
        ]

    def _executor(self, submitit):
        """The submitit executor with this launcher's settings (as hydra-submitit-launcher builds it)."""
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        init = {
            "folder": self.params["submitit_folder"],
            "slurm_max_num_timeout": self.params.get("max_num_timeout", 0),
        }
        executor = submitit.AutoExecutor(cluster="slurm", **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in base else f"slurm_{k}": v
                for k, v in self.params.items()
                if k not in {"submitit_folder", "max_num_timeout"}
            }
        )
        return executor

    def wait(self, jobs: list, labels: dict[str, str]) -> dict[str, str | None]:
        """Wait until every job has its results or has ended; returns each job's last SLURM state
        (None where its results arrived). Prints the reason of jobs pending too long."""
        from speechbias.launch.slurm.queue import TERMINAL_STATES, PendingReporter, queue_states

        reporter = PendingReporter(after_s=self.pending_report_s)
        open_jobs = {j.job_id: j for j in jobs}
        final: dict[str, str | None] = {}
        last_state: dict[str, str] = {}
        ended_at: dict[str, float] = {}
        while open_jobs:
            for job_id, job in list(open_jobs.items()):
                if _has_results(job):
                    final[job_id] = None
                    del open_jobs[job_id]
            if not open_jobs:
                break
            entries = queue_states({j.split("_")[0] for j in open_jobs})
            if entries is not None:
                reporter.update({k: v for k, v in entries.items() if k in open_jobs}, labels)
                now = time.monotonic()
                for job_id in list(open_jobs):
                    entry = entries.get(job_id)
                    if entry is not None:
                        last_state[job_id] = entry.state
                    if entry is None or entry.state in TERMINAL_STATES:
                        # results are written before the job ends; allow the file system a moment
                        ended_at.setdefault(job_id, now)
                        if now - ended_at[job_id] > 10 * self.poll_s or (
                            entry and entry.state != "COMPLETED" and now - ended_at[job_id] > self.poll_s
                        ):
                            final[job_id] = last_state.get(job_id)
                            del open_jobs[job_id]
                    else:
                        ended_at.pop(job_id, None)
            time.sleep(self.poll_s)
        return final

    def _job_return(self, job, overrides: list[str], idx: int, state: str | None) -> JobReturn:
        """The job's JobReturn; a job without results is recorded as failed in its folder (the sweep
        table then shows why), never raised: the sweep goes on to its table and exit status."""
        from speechbias.launch.slurm.queue import failure_reason
        from speechbias.launch.sweep_status import current_sweep_id, record_failure

        ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=None)
        error, ended_early = None, False
        if _has_results(job):
            try:
                ret.return_value = job.results()[0].return_value
            except Exception as exc:  # the job (one of its ranks) raised: it recorded its own error
                lines = [ln for ln in str(exc).splitlines() if ln.strip()]
                error = f"SLURM job {job.job_id} raised {lines[-1].strip() if lines else type(exc).__name__}"
        else:  # cancelled, timed out, killed, or a rank failed and srun ended the others
            error, ended_early = failure_reason(job.job_id, state, [job.paths.stderr, job.paths.stdout]), True
        if error:
            job_dir = self._job_dir(overrides, idx)
            if job_dir is not None and record_failure(
                job_dir, error, overrides, current_sweep_id(), add_to_failed=ended_early
            ):
                log.warning("%s: %s", " ".join(overrides), error)
        return ret

    def _job_dir(self, overrides: list[str], idx: int) -> Path | None:
        """The folder Hydra gives this job (``hydra.sweep.dir``/``hydra.sweep.subdir``)."""
        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(cfg.hydra.job):
                cfg.hydra.job.num = idx
                cfg.hydra.job.id = str(idx)
            return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
        except Exception as exc:  # no folder to write to: the table reads the job as never finished
            log.warning("could not find the folder of job %s (%s)", " ".join(overrides), exc)
            return None


def _singleton_state():
    from hydra.core.singleton import Singleton

    return Singleton.get_state()


def _has_results(job) -> bool:
    """Whether every task of the job wrote its result file."""
    from submitit.core.utils import JobPaths

    folder = job.paths.folder
    return all(
        JobPaths(folder, job_id=job.job_id, task_id=t).result_pickle.exists()
        for t in range(max(1, int(getattr(job, "num_tasks", 1))))
    )
