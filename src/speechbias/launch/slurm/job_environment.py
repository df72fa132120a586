"""This process as SLURM started it: tasks (ranks) per node, nodes, and its own rank.

Inside a job of the SLURM launcher, :func:`slurm_tasks` reads submitit's own ``JobEnvironment`` (which
reads the variables ``sbatch``/``srun`` set). One rank per SLURM task is how distributed jobs run on a
cluster (Lightning's ``SLURMEnvironment`` reads the same variables); ``ddp_spawn`` is for processes
that no cluster manager started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# where a distributed launcher (torchrun, Lightning's DDP, srun, jsrun) puts a process's rank, in
# the order Lightning reads them (lightning_fabric.utilities.rank_zero)
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


@dataclass(frozen=True)
class SlurmTasks:
    """The SLURM job step this process belongs to: ``tasks_per_node`` ranks on each of ``nodes``
    nodes (``ntasks`` in all); ``procid`` is this process's global rank."""

    job_id: str
    ntasks: int
    tasks_per_node: int
    nodes: int
    procid: int


def slurm_tasks() -> SlurmTasks | None:
    """The SLURM step of this process as ``submitit.JobEnvironment`` gives it, or None outside a job
    that submitit started on SLURM (its job script sets ``SUBMITIT_EXECUTOR=slurm``; submitit is
    imported only then)."""
    if os.environ.get("SUBMITIT_EXECUTOR") != "slurm":
        return None
    import submitit

    job = submitit.JobEnvironment()
    nodes = max(1, job.num_nodes)
    return SlurmTasks(
        job_id=job.job_id,
        ntasks=job.num_tasks,
        tasks_per_node=max(1, job.num_tasks // nodes),
        nodes=nodes,
        procid=job.global_rank,
    )


def process_rank(environ: dict | None = None) -> int:
    """This process's global rank as Lightning reads it (0 in a plain process)."""
    env = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0
