"""``hydra/launcher=slurm``: hydra-submitit-launcher's SLURM launcher, checked before and watched after.

:class:`SpeechbiasSlurmLauncher` subclasses the plugin's ``SlurmLauncher``: ``launch`` runs its checks,
then the plugin's own ``launch`` (executor, parameters, ``sweep.mode``, logged overrides, job array).
What it adds, each through a point the plugin or submitit lets a subclass use:

* before anything is submitted, a request no node of the partition can satisfy (GPUs on a partition
  without them, more CPUs or memory than its largest node, an unknown partition) stops the sweep
  with one line naming the setting (:func:`speechbias.launch.slurm.resources.resource_problem`), as does
  ``tasks_per_node > 1`` with a single-process trainer (``launch``, before ``super().launch()``); an
  unknown partition of the statistics set that follows ``hydra.launcher.partition`` names that key;
* when the statistics set replaces a ``cpus_per_task``/``mem_gb`` typed for the configured set, one
  line says so;
* ``dry_run=true``: each job's resources and each array's sbatch script (submitit's text) are printed,
  nothing is submitted and no cluster is needed (the checks still run where ``sinfo`` answers);
* jobs that need no model forward (an ``evaluate.py task=speat`` job whose every clip is in the feature
  cache, or whose upstream is weight-free and trainer on CPU:
  :mod:`speechbias.launch.slurm.statistics_jobs`) are submitted as an array of their own with the
  ``statistics`` resource set (no GPU, few CPUs, little memory, a short time limit:
  :func:`speechbias.launch.slurm.resources.statistics_parameters`), the others with the configured
  resources; job numbers, return order, the sweep table and requeueing are those of one array
  (``submission_groups``, through the executor); ``statistics.enabled=false`` submits all alike;
* ``srun --kill-on-bad-exit=1``: a rank that fails ends its whole job at once (the plugin's
  ``srun_args`` setting, completed in ``__init__``);
* the jobs are watched with ``squeue`` (submitit polls ``sacct``, which warns on every poll where the
  cluster keeps no accounting): a job pending longer than ``pending_report_s`` prints its SLURM
  reason; a requeued job (``scontrol requeue``, time limit) is waited for;
* a job that ends without a result (cancelled, timed out, killed, a failed rank) is recorded as failed
  in its folder's ``job_status.json`` with its reason, and the sweep still ends with its table (and
  exit 1) instead of a traceback;
* in a job of several tasks, each rank first checks that the DDP master address resolves and answers
  (``__call__``, before the plugin's): one line naming the host in the table within seconds, not ranks
  retrying their rendezvous until the 30-minute process-group timeout;
* each attempt of a job (``SLURM_JOB_ID`` + ``SLURM_RESTART_COUNT``) fences its job folder: once a
  requeued copy has started, the attempt before it writes nothing more there (``__call__``).

The split and the last two go through the executor: the launcher names speechbias's submitit executor
(``_EXECUTOR``, registered as a submitit plug-in: :mod:`speechbias.library_internals.submitit`), which
asks :meth:`SpeechbiasSlurmLauncher.submission_groups` which jobs to submit together and hands the
submitted jobs to :meth:`SpeechbiasSlurmLauncher.watch_jobs`; the plugin's
``[job.results()[0] for job in jobs]`` then waits through :class:`SweepWatch`.
Tested with hydra-submitit-launcher 1.2 (the bound in pyproject.toml).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf, open_dict

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

log = logging.getLogger(__name__)

KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"
# after a stop signal, how long the sweep's process waits for the jobs it cancelled to leave the queue (their
# ranks record "stopped by SIGTERM during <phase>" within SLURM's KillWait; 30 s by default, 5 on CI)
CANCEL_WAIT_S = 15.0
# where the configured set and the statistics set are set (conf/hydra/launcher/slurm.yaml)
CONFIGURED_PREFIX = "hydra.launcher."
STATISTICS_PREFIX = "hydra.launcher.statistics."
# the resources a dry run prints for each job
DRY_RUN_RESOURCES = ("partition", "timeout_min", "nodes", "tasks_per_node", "cpus_per_task", "gpus_per_node", "mem_gb")


class SpeechbiasSlurmLauncher(SlurmLauncher):
    """See the module docstring. ``pending_report_s``: seconds of pending before a job's reason is
    printed; ``poll_s``: seconds between ``squeue`` calls; ``statistics``: the resource set of jobs that
    need no forward (``enabled``, ``partition``, ``timeout_min``, ``cpus_per_task``, ``mem_gb``); other
    keys: hydra-submitit-launcher's."""

    # speechbias.library_internals.submitit.EXECUTOR_NAME (not imported here: plugin discovery stays light)
    _EXECUTOR = "speechbiasslurm"

    def __init__(
        self,
        pending_report_s: float = 60.0,
        poll_s: float = 2.0,
        srun_args: Sequence[str] | None = None,
        statistics: Mapping | None = None,
        dry_run: bool = False,
        **params: Any,
    ) -> None:
        srun = [
            str(a) for a in (OmegaConf.to_container(srun_args) if OmegaConf.is_config(srun_args) else srun_args or [])
        ]
        if not any(a.startswith("--kill-on-bad-exit") for a in srun):
            srun.append(KILL_ON_BAD_EXIT)
        super().__init__(srun_args=srun, **params)
        self.pending_report_s = float(pending_report_s)
        self.poll_s = float(poll_s)
        plain = OmegaConf.to_container(statistics, resolve=True) if OmegaConf.is_config(statistics) else statistics
        self.statistics = dict(plain or {})
        self.dry_run = bool(dry_run)
        # numbers of the jobs of the current launch that run with the statistics set
        self.statistics_jobs: frozenset[int] = frozenset()

    # -- before submission --------------------------------------------------------------------
    def installation_problem(self) -> str | None:
        """One line when this machine cannot submit (no sbatch, submitit outside its bound), or None; a dry
        run submits nothing and needs no sbatch."""
        import shutil

        if shutil.which("sbatch") is None and not self.dry_run:
            return (
                "hydra/launcher=slurm needs SLURM's sbatch on PATH (run on the cluster's login node); "
                "on this machine use hydra/launcher=parallel"
            )
        from speechbias.library_internals.submitit import submitit_problem

        return submitit_problem()

    def check_request(self, configured: bool = True, statistics: bool = False) -> str | None:
        """One line saying what cannot run (the installation, the resources of each set that has jobs:
        ``configured`` and ``statistics``, ranks vs. trainer), or None."""
        from speechbias.launch.slurm.resources import cluster_partitions, resource_problem

        problem = self.installation_problem()
        if problem:
            return problem
        partitions = cluster_partitions() if configured or statistics else None
        if configured:
            problem = resource_problem(self.params, partitions)
        if not problem and statistics:
            problem = resource_problem(
                self.statistics_params(),
                partitions,
                prefix=STATISTICS_PREFIX,
                partition_key=None if self.typed_statistics("partition") else f"{CONFIGURED_PREFIX}partition",
            )
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

    def typed_launcher_keys(self) -> set[str]:
        """The ``hydra.launcher.*`` keys set on the command line (Hydra's ``hydra.overrides.hydra``)."""
        typed = OmegaConf.select(self.config, "hydra.overrides.hydra", default=None) if self.config else None
        keys = {str(o).split("=", 1)[0].lstrip("+~") for o in typed or []}
        return {k for k in keys if k.startswith(CONFIGURED_PREFIX)}

    def typed_statistics(self, setting: str) -> bool:
        """Whether the statistics set's ``setting`` has a value of its own: typed, or other than the
        configured set's (else it follows ``hydra.launcher.<setting>``, e.g. the partition)."""
        if f"{STATISTICS_PREFIX}{setting}" in self.typed_launcher_keys():
            return True
        return self.statistics_params().get(setting) != self.params.get(setting)

    def replaced_settings_line(self) -> str | None:
        """One line when the statistics set replaces a ``cpus_per_task``/``mem_gb`` the user typed for the
        configured set (and did not type for the statistics set), or None."""
        typed, stats = self.typed_launcher_keys(), self.statistics_params()
        replaced = [
            k
            for k in ("cpus_per_task", "mem_gb")
            if f"{CONFIGURED_PREFIX}{k}" in typed
            and f"{STATISTICS_PREFIX}{k}" not in typed
            and stats.get(k) != self.params.get(k)
        ]
        if not replaced:
            return None
        yours = " ".join(f"{CONFIGURED_PREFIX}{k}={self.params.get(k)}" for k in replaced)
        theirs = " ".join(f"{STATISTICS_PREFIX}{k}={stats.get(k)}" for k in replaced)
        return (
            f"{yours} not applied to the {len(self.statistics_jobs)} job(s) that need no model forward: they get "
            f"{theirs} (set those to change it, or {STATISTICS_PREFIX}enabled=false)"
        )

    def statistics_params(self) -> dict:
        """The launcher settings of a job that needs no forward (the statistics set over the configured)."""
        from speechbias.launch.slurm.resources import statistics_parameters

        return statistics_parameters(self.params, self.statistics)

    def find_statistics_jobs(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> frozenset[int]:
        """The numbers of the jobs that need no model forward, each decided from its composed config
        (jobs whose overrides differ only in keys that cannot change it are composed once)."""
        if not self.statistics.get("enabled", True) or self.config is None or self.hydra_context is None:
            return frozenset()
        from speechbias.launch.slurm.statistics_jobs import ForwardNeeds, decision_key

        needs, answers, found = ForwardNeeds(), {}, set()
        for offset, overrides in enumerate(job_overrides):
            key = decision_key(overrides)
            if key not in answers:
                try:
                    job = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                    answers[key] = needs.statistics_only(job)
                except Exception as exc:  # noqa: BLE001 - the job keeps the configured resources, reports itself
                    log.debug("job %s: %s", " ".join(overrides), exc)
                    answers[key] = False
            if answers[key]:
                found.add(initial_job_idx + offset)
        return frozenset(found)

    # -- launch --------------------------------------------------------------------------------
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        problem = self.installation_problem()
        if not problem:
            self.statistics_jobs = self.find_statistics_jobs(job_overrides, initial_job_idx)
            n_statistics = len(self.statistics_jobs)
            problem = self.check_request(configured=n_statistics < len(job_overrides), statistics=n_statistics > 0)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(1)
        if self.statistics_jobs:
            stats = self.statistics_params()
            log.info(
                "%d of %d job(s) need no model forward: submitted without GPUs (%s%s)",
                len(self.statistics_jobs),
                len(job_overrides),
                STATISTICS_PREFIX,
                ", ".join(f"{k}={stats.get(k)}" for k in ("timeout_min", "cpus_per_task", "mem_gb")),
            )
            replaced = self.replaced_settings_line()
            if replaced:
                log.warning(replaced)
        if self.dry_run:
            print(self.dry_run_text(job_overrides, initial_job_idx), flush=True)
            self.statistics_jobs = frozenset()
            sys.exit(0)  # nothing submitted: no job to wait for, no sweep table
        try:
            return super().launch(job_overrides, initial_job_idx)
        finally:
            self.statistics_jobs = frozenset()

    def dry_run_text(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> str:
        """What ``hydra.launcher.dry_run=true`` prints: per array to submit (configured set, statistics
        set), each job's number, overrides and resources, then the array's sbatch script (submitit's text)."""
        from speechbias.library_internals.submitit import sbatch_script

        numbers = [initial_job_idx + i for i in range(len(job_overrides))]
        arrays = [
            ("configured", self.params, [n for n in numbers if n not in self.statistics_jobs]),
            ("statistics (no model forward)", self.statistics_params(), sorted(self.statistics_jobs)),
        ]
        out = [f"dry run: {len(numbers)} job(s), nothing submitted"]
        for label, settings, jobs in arrays:
            if not jobs:
                continue
            resources = ", ".join(f"{k}={settings[k]}" for k in DRY_RUN_RESOURCES if settings.get(k) is not None)
            array = " (one array)" if len(jobs) > 1 else ""
            out.append(f"{len(jobs)} job(s) with the {label} resources{array}: {resources}")
            out += [f"  #{n} : {' '.join(job_overrides[n - initial_job_idx])}" for n in jobs]
            out.append(f"their sbatch script (submitit_folder={settings.get('submitit_folder')}):")
            out.append(sbatch_script(settings, len(jobs)))
        return "\n".join(out)

    def submission_groups(self, args: list[tuple]) -> list[tuple[dict, list[int]]]:
        """Called by the executor with each job's arguments (this launcher's ``__call__`` arguments:
        overrides, job dir key, job number, ...): the jobs to submit as one array each, with the
        settings that replace the configured ones (none for the configured set's array)."""
        statistics = [i for i, a in enumerate(args) if int(a[2]) in self.statistics_jobs]
        configured = [i for i in range(len(args)) if i not in set(statistics)]
        groups: list[tuple[dict, list[int]]] = [({}, configured)] if configured else []
        if statistics:
            settings = self.statistics_params()
            groups.append(({k: v for k, v in settings.items() if self.params.get(k) != v}, statistics))
        return groups

    def watch_jobs(self, jobs: list, args: list[tuple]) -> list[WatchedJob]:
        """Called by the executor with the submitted jobs and each one's arguments (this launcher's
        ``__call__`` arguments: overrides, job dir key, job number, ...): the jobs the plugin waits on."""
        sweep = SweepWatch(self, jobs, [(list(a[0]), int(a[2])) for a in args])
        return [WatchedJob(job, sweep) for job in jobs]

    # -- inside a job (each rank) -------------------------------------------------------------
    def __call__(self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str, singleton_state):
        """Each rank of a job: the attempt fences its job folder (a stale attempt of a requeued job stops,
        and can no longer write there once the copy started: :mod:`speechbias.launch.slurm.attempt_fence`);
        a job of several tasks checks that its DDP master resolves and answers (one line in the job's
        status, the rank exits 1 and srun ends the others); then the plugin's ``__call__`` runs the job."""
        from hydra.core.singleton import Singleton

        from speechbias.launch.slurm.job_environment import slurm_tasks

        Singleton.set_state(singleton_state)  # as the plugin's __call__ does, for the job's folder
        tasks = slurm_tasks()
        job_dir = self.job_dir(list(sweep_overrides), job_num) if tasks is not None else None
        if job_dir is not None:
            from speechbias.fileio.atomic_file import add_write_guard
            from speechbias.launch.slurm.attempt_fence import AttemptFence, attempt_id

            fence = AttemptFence(job_dir, attempt_id(tasks.job_id))
            fence.claim()
            add_write_guard(fence)
        problem = rendezvous_problem()
        if problem:
            from speechbias.launch.slurm.job_environment import process_rank
            from speechbias.launch.sweep_status import current_sweep_id, record_failure

            line = f"rank {process_rank()}: {problem}"
            if job_dir is not None:
                record_failure(job_dir, line, list(sweep_overrides), current_sweep_id())
            print(f"error: {line}", file=sys.stderr, flush=True)
            raise RuntimeError(line)
        return super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)

    # -- after the jobs ended ------------------------------------------------------------------
    def job_return(self, job, overrides: list[str], idx: int, state: str | None) -> JobReturn:
        """The job's JobReturn; a job without results is recorded as failed in its folder (the sweep
        table then shows why), never raised: the sweep goes on to its table and exit status."""
        from speechbias.launch.slurm.queue import failure_reason
        from speechbias.launch.sweep_status import current_sweep_id, record_failure

        ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=None)
        error, ended_early = None, False
        if has_results(job):
            try:
                ret.return_value = job.results()[0].return_value
            except Exception as exc:  # the job (one of its ranks) raised: it recorded its own error
                lines = [ln for ln in str(exc).splitlines() if ln.strip()]
                error = f"SLURM job {job.job_id} raised {lines[-1].strip() if lines else type(exc).__name__}"
        else:  # cancelled, timed out, killed, or a rank failed and srun ended the others
            error, ended_early = failure_reason(job.job_id, state, [job.paths.stderr, job.paths.stdout]), True
        if error:
            job_dir = self.job_dir(overrides, idx)
            if job_dir is not None and record_failure(
                job_dir, error, overrides, current_sweep_id(), add_to_failed=ended_early
            ):
                log.warning("%s: %s", " ".join(overrides), error)
        return ret

    def job_dir(self, overrides: list[str], idx: int) -> Path | None:
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


class SweepWatch:
    """The jobs of one ``launch``, waited for together with ``squeue``: the first ``job_return`` waits
    until every job has its results or has ended (printing the reason of jobs pending too long)."""

    def __init__(self, launcher: SpeechbiasSlurmLauncher, jobs: list, calls: list[tuple[list[str], int]]):
        from speechbias.launch.signals import on_sweep_stop

        self.launcher = launcher
        self.jobs = {job.job_id: (job, overrides, idx) for job, (overrides, idx) in zip(jobs, calls)}
        self.final: dict[str, str | None] | None = None
        # a stop signal to the sweep's process cancels these jobs before its table (the folder lookups of
        # jobs that never started cost a compose each: ~0.2 s a job)
        on_sweep_stop(self.cancel, CANCEL_WAIT_S + 5.0 + 0.5 * len(self.jobs))

    def cancel(self, stop) -> None:
        """The sweep's process got ``stop`` (SIGTERM, SIGINT): ``scancel`` its jobs that have no results yet,
        wait up to :data:`CANCEL_WAIT_S` for them to leave the queue, then record each one failed with
        ``SLURM job <id> cancelled by the sweep's SIGTERM`` (after the job's own line when it recorded one),
        so that the sweep's table lists every job it submitted."""
        import subprocess

        from speechbias.launch.slurm.queue import TERMINAL_STATES, queue_states
        from speechbias.launch.sweep_status import current_sweep_id, record_failure

        ids = [job_id for job_id, (job, _, _) in self.jobs.items() if not has_results(job)]
        if not ids:
            return
        try:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("scancel %s: %s", " ".join(ids), exc)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            entries = queue_states({j.split("_")[0] for j in ids})
            if entries is not None and all(entries.get(j) is None or entries[j].state in TERMINAL_STATES for j in ids):
                break
            time.sleep(0.5)
        for job_id in ids:
            job, overrides, idx = self.jobs[job_id]
            if has_results(job):  # it finished while being cancelled
                continue
            job_dir = self.launcher.job_dir(overrides, idx)
            if job_dir is not None:
                error = f"SLURM job {job_id} cancelled by the sweep's {stop.signal_name}"
                record_failure(job_dir, error, overrides, current_sweep_id(), add_to_failed=True)

    def job_return(self, job_id: str) -> JobReturn:
        if self.final is None:
            self.final = self.wait()
        job, overrides, idx = self.jobs[job_id]
        return self.launcher.job_return(job, overrides, idx, self.final.get(job_id))

    def wait(self) -> dict[str, str | None]:
        """Each job's last SLURM state (None where its results arrived), once every job has ended."""
        from speechbias.launch.slurm.queue import TERMINAL_STATES, PendingReporter, queue_states

        poll_s = self.launcher.poll_s
        reporter = PendingReporter(after_s=self.launcher.pending_report_s)
        labels = {job_id: " ".join(overrides) for job_id, (_, overrides, _) in self.jobs.items()}
        open_jobs = {job_id: job for job_id, (job, _, _) in self.jobs.items()}
        final: dict[str, str | None] = {}
        last_state: dict[str, str] = {}
        ended_at: dict[str, float] = {}
        while open_jobs:
            for job_id, job in list(open_jobs.items()):
                if has_results(job):
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
                        if now - ended_at[job_id] > 10 * poll_s or (
                            entry and entry.state != "COMPLETED" and now - ended_at[job_id] > poll_s
                        ):
                            final[job_id] = last_state.get(job_id)
                            del open_jobs[job_id]
                    else:
                        ended_at.pop(job_id, None)
            time.sleep(poll_s)
        return final


class WatchedJob:
    """A submitted job as the plugin's ``launch`` sees it: ``results()`` waits through the sweep's
    :class:`SweepWatch` and gives ``[JobReturn]``, never raising for a job that failed."""

    def __init__(self, job, sweep: SweepWatch):
        self.job, self.sweep = job, sweep

    @property
    def job_id(self) -> str:
        return self.job.job_id

    def results(self) -> list[JobReturn]:
        return [self.sweep.job_return(self.job.job_id)]


def rendezvous_problem() -> str | None:
    """In a SLURM job of several tasks: why this rank cannot reach the DDP master, or None."""
    from speechbias.launch.slurm.job_environment import slurm_tasks

    tasks = slurm_tasks()
    if tasks is None or tasks.ntasks < 2:
        return None
    from speechbias.launch.slurm.rendezvous import master_problem, slurm_master

    return master_problem(*slurm_master())


def has_results(job) -> bool:
    """Whether every task (rank) of the submitit job wrote its result file."""
    tasks = max(1, int(getattr(job, "num_tasks", 1)))
    if tasks == 1:
        return job.paths.result_pickle.exists()
    return all(job.task(t).paths.result_pickle.exists() for t in range(tasks))
