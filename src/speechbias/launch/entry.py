"""Shared body of the entry points: check the config, seed, instantiate and run a task, record how it went.

:func:`run_script` is the ``__main__`` body of ``evaluate.py`` and ``train.py``; :func:`run_entry` is what they
run under ``@hydra.main``: it checks the config before anything heavy is imported, records the job's status in
its folder (:mod:`speechbias.launch.sweep_status`), prints a user input error as one line and exits 1 (inside a
multirun it records the failure and returns, so the other jobs run), and ends a single run with one line
saying where the results are (and the ``wandb sync`` command of an offline W&B run).
:func:`run_task` runs the task only (tests call it in-process); :func:`build_task` builds its object.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from speechbias.launch.aggregation_configs import register_aggregation_configs
from speechbias.launch.config_checks import check_command_line, check_config_unless_checked, task_module_of
from speechbias.launch.help_text import register_help_resolver
from speechbias.launch.parent_watch import job_done, watch_sweep_parent
from speechbias.launch.signals import (
    RunStopped,
    ends_on_signals,
    exit_now,
    print_stop_line,
    record_stop,
    running_job,
    stops_handled,
)
from speechbias.launch.run_folder_lock import hold_run_folder
from speechbias.launch.storage_check import register_run_folders
from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.folder_lock import FolderBusyError, release
from speechbias.project_paths import user_path
from speechbias.run_context import register_choice_resolver
from speechbias.tasks.run_markers import (
    await_checkpoint_claim,
    claim_checkpoints,
    finished_results,
    record_run_digest,
)
from speechbias.seeding import seed_run
from speechbias.launch.slurm.job_environment import SlurmTasks, process_rank, slurm_tasks
from speechbias.launch.sweep_status import JobStatus, current_sweep_id, job_error, read_status, reused_status
from speechbias.errors import (
    FULL_ERROR_HINT,
    ConfigError,
    StorageError,
    error_line,
    find_user_error,
    full_error_requested,
    log_traceback_to_files,
)

log = logging.getLogger("speechbias")

PROJECT_ROOT_RESOLVER = "speechbias.project_root"


def register_project_root(root: str | Path | None = None) -> None:
    """Register ``${speechbias.project_root:}``, the default of ``paths.root_dir``: ``root`` (the
    entry scripts' folder), or the current folder when none is given. :func:`run_script` calls it before
    ``@hydra.main`` so that runs and sweeps find ``conf/``, the demo data and ``multirun/`` from any
    working directory."""
    value = str(Path(root).resolve()) if root is not None else None
    OmegaConf.register_new_resolver(PROJECT_ROOT_RESOLVER, lambda: value or os.getcwd(), replace=True)


def run_script(main: Callable[[], object], script: str) -> None:
    """The ``__main__`` body of the entry script at path ``script`` (config ``conf/<its stem>.yaml``, ``@hydra.main``
    function ``main``): ``paths.root_dir`` defaults to its folder, ``--help`` reads its ``conf/``, an unknown option
    is one line naming the close matches, a stop signal one line (a sweep's table first) and exit 128 + signal."""
    root = Path(script).resolve().parent
    register_project_root(root)
    register_help_resolver(root / "conf")
    with ends_on_signals():
        check_command_line(root / "conf", config_name=Path(script).stem)
        main()


register_project_root()
register_choice_resolver()
register_aggregation_configs()  # options of config group aggregation, before @hydra.main composes
# ${speechbias.user_path:<path>,<project root>}: a typed relative path, from the cwd when it exists there
OmegaConf.register_new_resolver("speechbias.user_path", lambda value, root: str(user_path(value, root)), replace=True)


def _clip_length_limit(root) -> tuple[float | None, str | None]:
    from speechbias.features.clip_memory import clip_length_limit

    return clip_length_limit(root)


# ${speechbias.clip_limit_seconds:} / ${speechbias.clip_limit_text:}: the run's longest clip and how a refusal
# names it (extraction.max_clip_seconds, auto derived from the upstream and the memory), for the tasks' clip_check;
# computed once for both (clip_memory.clip_length_limit's memo)
OmegaConf.register_new_resolver(
    "speechbias.clip_limit_seconds", lambda *, _root_: _clip_length_limit(_root_)[0], replace=True
)
OmegaConf.register_new_resolver(
    "speechbias.clip_limit_text", lambda *, _root_: _clip_length_limit(_root_)[1], replace=True
)


# Lightning's SLURM cluster environment without its own requeue (on USR1): submitit's handler (on the
# USR2 of sbatch --signal) requeues the job, counting hydra.launcher.max_num_timeout; one mechanism only
SLURM_ENVIRONMENT_NO_REQUEUE = {
    "_target_": "lightning_fabric.plugins.environments.SLURMEnvironment",
    "auto_requeue": False,
}
DISTRIBUTED_STRATEGIES = ("ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "ddp_find_unused_parameters_true")


def job_trainer_config(
    trainer_cfg: DictConfig, tasks: SlurmTasks | None = None, multirun: bool | None = None
) -> DictConfig:
    """The trainer config to use in this job (``tasks``: this process's SLURM step, read from the
    environment when not given; ``multirun``: inside a Hydra multirun, detected when not given).

    * In a SLURM job of N > 1 tasks, SLURM has started the ranks: one rank per task, so the strategy
      is ``ddp`` (Lightning's ``SLURMEnvironment``), ``devices`` = tasks per node and ``num_nodes`` =
      nodes, whatever ``ddp``/``ddp_spawn``/``ddp_sim`` said. A single-process trainer there is an
      error naming ``hydra.launcher.tasks_per_node`` (every task would run the whole job).
    * In a SLURM job of one task, a trainer asking for several devices is an error naming
      ``hydra.launcher.tasks_per_node`` (Lightning would take the job for one rank while
      ``ddp_spawn`` starts several: ``EADDRINUSE``); ``devices: -1`` means the GPUs SLURM gave the job.
    * In any SLURM job, Lightning's SLURM environment does not requeue the job on USR1 itself
      (:data:`SLURM_ENVIRONMENT_NO_REQUEUE`): the launcher's submitit does, once.
    * Elsewhere, under a Hydra multirun, ``strategy: ddp`` becomes ``ddp_spawn``: plain ``ddp`` starts
      its extra processes by re-running the command line, which inside a multirun is the whole sweep.
    """
    tasks = slurm_tasks() if tasks is None else tasks
    multirun = hydra_multirun() if multirun is None else multirun
    strategy = OmegaConf.select(trainer_cfg, "strategy", default=None)
    distributed = isinstance(strategy, str) and strategy in DISTRIBUTED_STRATEGIES
    if tasks is not None:
        return _slurm_trainer_config(trainer_cfg, tasks, strategy if distributed else None)
    if not (distributed and strategy == "ddp" and multirun):
        return trainer_cfg
    log.warning(
        "trainer.strategy=ddp inside a Hydra multirun re-launches the whole sweep in every child "
        "process; using strategy=ddp_spawn for this job instead"
    )
    cfg = OmegaConf.create(OmegaConf.to_container(trainer_cfg, resolve=False))
    cfg.strategy = "ddp_spawn"
    return cfg


def _slurm_trainer_config(trainer_cfg: DictConfig, tasks: SlurmTasks, strategy: str | None) -> DictConfig:
    """:func:`job_trainer_config` inside a SLURM step (one rank per task)."""
    devices = OmegaConf.select(trainer_cfg, "devices", default=1)
    if tasks.ntasks == 1:
        wanted = _slurm_devices(devices)
        if strategy is not None and wanted > 1:
            raise ConfigError(
                f"trainer.devices={devices} asks for {wanted} ranks, but this SLURM job has one task: "
                f"set hydra.launcher.tasks_per_node={wanted} (one rank per SLURM task)"
            )
    elif strategy is None:
        raise ConfigError(
            f"hydra.launcher.tasks_per_node={tasks.tasks_per_node} starts {tasks.ntasks} ranks, but "
            "this trainer runs one process: use trainer=ddp (trainer.accelerator=cpu without GPUs), "
            "or hydra.launcher.tasks_per_node=1"
        )
    cfg = OmegaConf.create(OmegaConf.to_container(trainer_cfg, resolve=False))
    if tasks.ntasks > 1:
        cfg.strategy, cfg.devices, cfg.num_nodes = "ddp", tasks.tasks_per_node, tasks.nodes
    if "plugins" not in cfg:  # the launcher (submitit) requeues at the time limit, not Lightning
        cfg.plugins = [SLURM_ENVIRONMENT_NO_REQUEUE]
    return cfg


def _slurm_devices(devices) -> int:
    """How many processes ``trainer.devices`` asks for in a SLURM job: a number, a list of device ids,
    or -1/"auto" = the GPUs SLURM gave the job (``SLURM_GPUS_ON_NODE``; 1 without GPUs)."""
    if isinstance(devices, int) and devices > 0:
        return devices
    if isinstance(devices, (list, tuple)) or OmegaConf.is_list(devices):
        return len(devices)
    gpus = os.environ.get("SLURM_GPUS_ON_NODE", "")
    return int(gpus) if gpus.isdigit() and int(gpus) > 0 else 1


def hydra_multirun() -> bool:
    """True inside a job of a Hydra multirun (``-m``)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def job_overrides() -> list[str]:
    """This job's command-line overrides (empty outside Hydra)."""
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def offline_wandb_runs(output_dir: Path, since: float) -> list[Path]:
    """Offline W&B run folders this run wrote below ``output_dir`` (to sync later)."""
    runs = [p for p in sorted(Path(output_dir).glob("wandb/offline-run-*")) if p.is_dir()]
    return [p for p in runs if p.stat().st_mtime >= since - 1]


def results_line(output_dir: Path, since: float) -> str:
    """``results in <folder>`` and, for each offline W&B run, ``; W&B offline: wandb sync <dir>``."""
    line = f"results in {output_dir}"
    for run in offline_wandb_runs(output_dir, since):
        line += f"; W&B offline: wandb sync {run}"
    return line


def run_entry(cfg: DictConfig) -> dict | None:
    """The body of the entry points (see the module docstring); returns the task's summary metrics
    ({} for a run that found its results), or None for a failed job of a multirun.

    SIGTERM and SIGINT stop the job (:mod:`speechbias.launch.signals`): it is recorded as failed with
    the signal, a single run prints one line, and the process exits 128 + the signal (in a basic
    launcher's sweep the stop goes on to the sweep's process, which prints the table).

    In a job of several ranks (a SLURM job of N tasks) rank zero records the job's status (a stop signal:
    every rank records it, the first wins); a rank
    that fails records its error (unless another rank already did) and exits non-zero, so that
    ``srun --kill-on-bad-exit`` ends the other ranks at once instead of leaving them waiting in a
    collective until the time limit.

    One writer per folder (:mod:`speechbias.launch.run_folder_lock`): a job whose folder another live
    process writes prints one line and exits 1 (in a multirun: fails), having written nothing there."""
    with stops_handled():
        output_dir = Path(cfg.paths.output_dir)
        try:  # one writer per folder: before its status, checkpoints, results (rank zero: the job's writer)
            took = process_rank() == 0 and hold_run_folder(output_dir)
        except (FolderBusyError, StorageError) as exc:  # busy: its status is its writer's; unwritable: no status
            return _refused(exc, cfg)
        try:
            return _run_job(cfg)
        finally:
            if took:
                release(output_dir)


def _refused(exc: Exception, cfg: DictConfig) -> None:
    """A job whose folder another process writes (or that cannot take a lock file): one line; exit 1, or
    in a multirun the job fails."""
    if full_error_requested():
        raise exc
    if hydra_multirun():
        job = " ".join(job_overrides()) or str(cfg.paths.output_dir)
        print(f"job failed ({job}): {error_line(exc)}", file=sys.stderr)
        return None
    print(error_line(exc), file=sys.stderr)
    sys.exit(1)


def _run_job(cfg: DictConfig) -> dict | None:
    """:func:`run_entry` inside its signal handling."""
    multirun = hydra_multirun()
    output_dir = Path(cfg.paths.output_dir)
    started = time.time()
    rank = process_rank()
    tasks = slurm_tasks()
    several_ranks = tasks is not None and tasks.ntasks > 1
    status = JobStatus(
        "running", overrides=job_overrides(), sweep_id=current_sweep_id(), started=started, pid=os.getpid()
    )
    previous = read_status(output_dir) if rank == 0 else None  # the record of the run that left results here
    register_run_folders(cfg, output_dir, multirun)  # a write that fails names the setting that moves its folder
    if rank == 0 or several_ranks:
        # a stop signal from now on records it; in a job of several ranks each rank does (the first wins):
        # after scancel, the rank that exits first with 143 makes srun --kill-on-bad-exit SIGKILL the others
        running_job(output_dir)
    if multirun:
        watch_sweep_parent(output_dir if rank == 0 else None)  # a loky worker ends when the sweep's process dies
    try:
        if rank == 0:
            status.write(output_dir)  # a full or read-only run folder fails here: one line, like any write
        check_config_unless_checked(cfg)
        skipped = finished_results(cfg, output_dir) is not None
        if skipped:  # the task would skip itself too; this way a resumed sweep skips without importing torch
            summary = {}
        else:
            if rank == 0:
                claim_checkpoints(cfg, output_dir)  # a checkpoint of another config is never resumed
            elif several_ranks:
                await_checkpoint_claim(cfg, output_dir)  # every rank resumes the same checkpoint, or none
            summary = run_task(cfg)
    except RunStopped as stop:
        record_stop(stop)
        job_done()
        if multirun and tasks is None:
            # to the sweep's process, which shows the table and exits (ends_on_signals): the basic launcher's
            # job runs in it; a parallel sweep's worker sends it back and waits (a worker that exited would
            # make loky kill the other workers before they record their stop)
            raise
        if rank == 0:  # a single run; a SLURM job (in its log)
            print_stop_line(stop)
        exit_now(stop.exit_code)
    except Exception as exc:
        status.status, status.seconds = "failed", time.time() - started
        status.error = job_error(exc) if rank == 0 or not several_ranks else f"rank {rank}: {job_error(exc)}"
        log_traceback_to_files(exc)
        status.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        running_job(None)
        earlier = read_status(output_dir) if several_ranks else None
        if not (earlier is not None and earlier.status == "failed" and earlier.started >= started - 600):
            write_status_if_possible(status, output_dir)  # the first rank to fail says why
        job_done()
        if multirun:
            job = " ".join(status.overrides) or str(output_dir)
            print(
                status.traceback
                if full_error_requested()
                else f"job failed ({job}): error: {status.error} ({FULL_ERROR_HINT})",
                file=sys.stderr,
            )
            if several_ranks:
                raise SystemExit(1) from exc
            return None
        if find_user_error(exc) is not None and not full_error_requested():
            print(error_line(exc), file=sys.stderr)
            sys.exit(1)
        raise
    if skipped:
        reused_status(previous, status)
    else:
        status.status, status.seconds = "ok", time.time() - started
    running_job(None)
    if rank == 0 and not write_status_if_possible(status, output_dir) and not multirun:
        sys.exit(1)  # the results are complete (their digest is written), the disk failed only the status
    job_done()
    if not multirun and rank == 0:
        print(results_line(output_dir, started))
    return summary


def write_status_if_possible(status: JobStatus, output_dir: Path) -> bool:
    """Write ``job_status.json``; on a full or read-only folder print its one line (not a second error
    chained to the one that failed the run) and return False."""
    try:
        status.write(output_dir)
        return True
    except StorageError as exc:
        if status.status != "failed":
            print(error_line(exc), file=sys.stderr)
        return False


def run_task(cfg: DictConfig) -> dict:
    """Build the task of ``cfg.task.run`` (:func:`build_task`: its ``_target_`` receives the built
    collaborators its config names, upstream, bias tests, cache, writer, tracker, trainer factory, and its
    settings groups) and run it with the resolved config (the tracker's record of the run); returns the
    task's summary metrics."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Lightning's seed_everything(seed, workers=True); torch's generator later for a task that says it
    # seeds it where it first needs torch (a warm SpEAT run imports no torch)
    seed_run(cfg.get("seed", 0), torch=not getattr(task_class_of(cfg), "seeds_torch_when_needed", False))
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    text = OmegaConf.to_yaml(cfg, resolve=False)  # OmegaConf.save's text, written atomically (a full disk: one line)
    atomic_write(output_dir / "config.yaml", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    if "trainer" in cfg:
        cfg.trainer = job_trainer_config(cfg.trainer)
    task = build_task(cfg)
    summary = task.run(config=resolved_config(cfg)) or {}
    from speechbias.report.run_writer import launching_process  # pandas: imported by the task already

    if launching_process():  # rank zero: the folder now holds this config's results (every output hashed)
        record_run_digest(cfg, output_dir)
    return summary


def build_task(cfg: DictConfig):
    """The task object of ``cfg.task.run``: its ``_target_`` called with the collaborators the node names (built
    by Hydra's instantiate) and with the task's settings groups, each ``cls.from_config(cfg)`` of the
    ``TASK_SETTINGS`` (constructor keyword -> settings class) of ``speechbias.tasks.<task.name>_checks``: the
    run node repeats no settings key. Imports what the task's module imports (torch for most tasks)."""
    settings = {key: group.from_config(cfg) for key, group in getattr(task_module_of(cfg), "TASK_SETTINGS", {}).items()}
    task = hydra.utils.instantiate(cfg.task.run, _partial_=True)(**settings)
    if not callable(getattr(task, "run", None)):
        raise TypeError(f"task.run._target_ must build a task object with a run(config) method, got {task!r}")
    return task


def task_class_of(cfg: DictConfig):
    """The class (or factory) ``task.run._target_`` names, imported; None when there is none to import
    (instantiating the task then says what is wrong)."""
    target = OmegaConf.select(cfg, "task.run._target_", default=None)
    try:
        return hydra.utils.get_object(target) if isinstance(target, str) else None
    except Exception:
        return None


def resolved_config(cfg: DictConfig) -> dict:
    """The job's config resolved, for the tracker. Hydra's own node is left out: a running job's config
    has none, and a config composed with ``return_hydra_config=True`` (tests) has one whose values only
    a running app fills in."""
    job = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    return OmegaConf.to_container(job, resolve=True, throw_on_missing=False)
