"""This process as SLURM started it: job id, tasks (ranks) per node, nodes, and its own rank.

Read from the variables ``sbatch``/``srun`` set. One rank per SLURM task is how distributed jobs run
on a cluster (Lightning's ``SLURMEnvironment`` reads the same variables); ``ddp_spawn`` is for
processes that no cluster manager started.
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


def _first_int(text: str | None, default: int) -> int:
    """``SLURM_NTASKS_PER_NODE``-style values: ``2``, ``2(x3)`` or ``2,1`` -> the first count."""
    if not text:
        return default
    head = text.split(",")[0].split("(")[0]
    return int(head) if head.isdigit() else default


def slurm_tasks(environ: dict | None = None) -> SlurmTasks | None:
    """The SLURM step of this process, or None outside one (no ``SLURM_JOB_ID``, or an interactive
    shell: a step needs ``SLURM_STEP_ID`` or ``SLURM_NTASKS``, as Lightning's detection does)."""
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_ARRAY_JOB_ID") and f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '0')}"
    job_id = job_id or env.get("SLURM_JOB_ID")
    if not job_id or "SLURM_NTASKS" not in env or env.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return None
    ntasks = _first_int(env.get("SLURM_NTASKS"), 1)
    nodes = _first_int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES"), 1)
    per_node = _first_int(env.get("SLURM_NTASKS_PER_NODE"), max(1, ntasks // max(nodes, 1)))
    return SlurmTasks(
        job_id=str(job_id),
        ntasks=ntasks,
        tasks_per_node=per_node,
        nodes=nodes,
        procid=_first_int(env.get("SLURM_PROCID"), 0),
    )


def process_rank(environ: dict | None = None) -> int:
    """This process's global rank as Lightning reads it (0 in a plain process)."""
    env = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0
