"""submitit's executor plug-in interface, used by the SLURM launcher (``hydra/launcher=slurm``).

Why it is needed: hydra-submitit-launcher's ``launch`` builds its executor by name
(``submitit.AutoExecutor(cluster=<launcher>._EXECUTOR)``), submits with ``map_array`` and returns
``[job.results()[0] for job in jobs]``. A launcher that runs its checks and then calls ``super().launch()``
can only change how the jobs are waited for (``squeue`` instead of ``sacct``, pending reasons) and what a
job without a result becomes (a failed row of the sweep table instead of a traceback) through that
executor. submitit lets a package add an executor (entry point group ``submitit``, name ``executor``,
declared in pyproject.toml); the hook an executor overrides to see what it submitted,
``_internal_process_submissions``, is submitit's plug-in interface but underscored, so it is used here
only, under a checked version bound (:data:`SUPPORTED`). To submit some jobs of one ``launch`` as an array
of their own resources (statistics-only jobs without GPUs), the executor also converts launcher settings
to its parameters with submitit's own ``_equivalence_dict``/``_convert_parameters`` (as ``AutoExecutor`` does)
and sets them for that array's submission (``self.parameters``, restored after). A dry run
(``hydra.launcher.dry_run=true``) renders the sbatch script of each array with submitit's own
``_make_sbatch_string`` (what ``SlurmExecutor._make_submission_file_text`` writes), without an executor:
submitit's executor refuses to be built where ``srun`` is absent, and a dry run needs no cluster.
"""

from __future__ import annotations

import shlex
import sys
from importlib.metadata import entry_points, version

import submitit
from submitit.slurm.slurm import _convert_mem, _make_sbatch_string

# the submitit releases whose executor hook (_internal_process_submissions(delayed_submissions) -> jobs,
# DelayedSubmission.function/.args, _equivalence_dict, _convert_parameters, parameters; for a dry run
# _make_sbatch_string(command, folder, map_count, **parameters) and _convert_mem) this module was tested with
SUPPORTED = (1, 5)
EXECUTOR_NAME = "speechbiasslurm"


def submitit_problem() -> str | None:
    """One line when the installed submitit is outside :data:`SUPPORTED` or this executor is not
    registered (a package installed before the entry point existed), else None."""
    installed = version("submitit")
    if tuple(int(p) for p in installed.split(".")[:2] if p.isdigit()) != SUPPORTED:
        wanted = ".".join(map(str, SUPPORTED))
        return (
            f"hydra/launcher=slurm is tested with submitit {wanted}.x, but {installed} is installed: "
            f'pip install "submitit>={wanted},<{SUPPORTED[0]}.{SUPPORTED[1] + 1}"'
        )
    names = {ep.name: ep.value for ep in entry_points(group="submitit")}
    if names.get("executor", "").split(":")[-1] != SpeechbiasSlurmExecutor.__name__:
        return "hydra/launcher=slurm: speechbias's submitit executor is not registered; reinstall: pip install -e ."
    return None


class SpeechbiasSlurmExecutor(submitit.SlurmExecutor):
    """submitit's SLURM executor (same parameters, same sbatch script) with two hooks of the submitted
    callable (the launcher), each optional:

    * ``submission_groups(args) -> [(settings, indices), ...]``: the jobs to submit as one array each
      (``indices`` into the submissions), with the launcher settings (``hydra.launcher.*`` names:
      ``timeout_min``, ``mem_gb``, ``gpus_per_node``, ``partition``, ...; None drops one) that replace the
      executor's for that array; jobs keep their order in what is returned;
    * ``watch_jobs(jobs, args)``: given the submitted jobs, returns what replaces them (objects with
      ``results()``).

    ``args``: each job's positional arguments, in submission order."""

    @classmethod
    def name(cls) -> str:
        return EXECUTOR_NAME

    @classmethod
    def affinity(cls) -> int:
        # below submitit's own SLURM executor: AutoExecutor() without cluster= never picks this one
        return min(1, super().affinity())

    def _internal_process_submissions(self, delayed_submissions):
        function = delayed_submissions[0].function if delayed_submissions else None
        args = [tuple(d.args) for d in delayed_submissions]
        groups = getattr(function, "submission_groups", None)
        parts = groups(args) if groups is not None else [({}, list(range(len(delayed_submissions))))]
        jobs: list = [None] * len(delayed_submissions)
        for settings, indices in parts:
            if not indices:
                continue
            kept = dict(self.parameters)
            try:
                if settings:
                    self.update_parameters(**self.sbatch_parameters(settings))
                submitted = super()._internal_process_submissions([delayed_submissions[i] for i in indices])
            finally:
                self.parameters = kept
            for i, job in zip(indices, submitted):
                jobs[i] = job
        if any(job is None for job in jobs):
            raise RuntimeError("submission_groups left jobs unsubmitted: every job must be in one group")
        watch = getattr(function, "watch_jobs", None)
        if watch is None:
            return jobs
        return list(watch(jobs, args))

    def sbatch_parameters(self, settings: dict) -> dict:
        """:func:`sbatch_parameters` of ``settings``."""
        return sbatch_parameters(settings)


def sbatch_parameters(settings: dict) -> dict:
    """Launcher settings (hydra-submitit-launcher's names) as submitit's SLURM parameters, converted as
    submitit's ``AutoExecutor`` converts them (``timeout_min`` -> ``time``, ``mem_gb`` -> ``mem``
    with its unit, ...); a None value stays None (no sbatch line)."""
    renamed = submitit.SlurmExecutor._equivalence_dict() or {}
    converted = {renamed.get(k, k): v for k, v in settings.items()}
    if converted.get("mem") is not None:
        converted["mem"] = _convert_mem(converted["mem"])
    return converted


# launcher settings that build the executor rather than its sbatch lines (hydra-submitit-launcher's init keys)
EXECUTOR_SETTINGS = ("submitit_folder", "max_num_timeout")


def sbatch_script(settings: dict, n_jobs: int) -> str:
    """The sbatch script that submitting ``n_jobs`` jobs (an array when several) with the launcher
    ``settings`` (``hydra.launcher.*`` names, ``submitit_folder`` included) writes: submitit's own text,
    with the command its executor submits; nothing is submitted or written."""
    folder = str(settings["submitit_folder"])
    lines = {k: v for k, v in settings.items() if k not in EXECUTOR_SETTINGS and v is not None}
    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(folder)])
    return _make_sbatch_string(
        command=command, folder=folder, map_count=n_jobs if n_jobs > 1 else None, **sbatch_parameters(lines)
    )
