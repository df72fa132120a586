"""submitit's executor plug-in interface, used by the SLURM launcher (``hydra/launcher=slurm``).

Why it is needed: hydra-submitit-launcher's ``launch`` builds its executor by name
(``submitit.AutoExecutor(cluster=<launcher>._EXECUTOR)``), submits with ``map_array`` and returns
``[job.results()[0] for job in jobs]``. A launcher that runs its checks and then calls ``super().launch()``
can only change how the jobs are waited for (``squeue`` instead of ``sacct``, pending reasons) and what a
job without a result becomes (a failed row of the sweep table instead of a traceback) through that
executor. submitit lets a package add an executor (entry point group ``submitit``, name ``executor``,
declared in pyproject.toml); the hook an executor overrides to see what it submitted,
``_internal_process_submissions``, is submitit's plug-in interface but underscored, so it is used here
only, under a checked version bound (:data:`SUPPORTED`).
"""

from __future__ import annotations

from importlib.metadata import entry_points, version

import submitit

# the submitit releases whose executor hook (_internal_process_submissions(delayed_submissions) -> jobs,
# DelayedSubmission.function/.args) this module was tested with
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
    """submitit's SLURM executor (same parameters, same sbatch script) that hands the jobs it submitted
    to the submitted callable's ``watch_jobs(jobs, args)``, whose return value (objects with
    ``results()``) replaces them. ``args``: each job's positional arguments, in submission order."""

    @classmethod
    def name(cls) -> str:
        return EXECUTOR_NAME

    @classmethod
    def affinity(cls) -> int:
        # below submitit's own SLURM executor: AutoExecutor() without cluster= never picks this one
        return min(1, super().affinity())

    def _internal_process_submissions(self, delayed_submissions):
        jobs = super()._internal_process_submissions(delayed_submissions)
        watch = getattr(delayed_submissions[0].function, "watch_jobs", None) if delayed_submissions else None
        if watch is None:
            return jobs
        return list(watch(jobs, [tuple(d.args) for d in delayed_submissions]))
