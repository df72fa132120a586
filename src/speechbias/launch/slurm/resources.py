"""Can the cluster ever run what a sweep asks for? Checked with ``sinfo`` before anything is submitted.

A request no node can satisfy does not fail at submission everywhere: GPUs on a partition without
them fail in ``sbatch`` with a long traceback, and more CPUs or memory than any node has leave the
job pending forever (reason ``PartitionConfig``). :func:`resource_problem` names the setting instead.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

# seconds sinfo may take (a controller that does not answer makes it wait for the network's timeout)
SINFO_TIMEOUT_S = 10

SINFO_FORMAT = "%P|%c|%m|%G|%D|%a"


@dataclass(frozen=True)
class Partition:
    """A partition as ``sinfo`` reports it: the largest node's ``cpus`` and ``memory_mb``, the number
    of ``nodes``, whether any node has GPUs (a ``gpu`` gres), and whether it is the ``default``."""

    name: str
    cpus: int
    memory_mb: int
    nodes: int
    gpus: bool
    default: bool
    up: bool


def parse_sinfo(text: str) -> list[Partition]:
    """Partitions from ``sinfo -h -o '%P|%c|%m|%G|%D|%a'`` (several lines per partition when its nodes
    differ: largest node, summed node count)."""
    merged: dict[str, Partition] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 6:
            continue
        name, cpus, mem, gres, nodes, avail = fields
        default = name.endswith("*")
        name = name.rstrip("*")
        part = Partition(name, _int(cpus), _int(mem), _int(nodes), "gpu" in gres.lower(), default, avail == "up")
        old = merged.get(name)
        if old is not None:
            part = Partition(
                name,
                max(old.cpus, part.cpus),
                max(old.memory_mb, part.memory_mb),
                old.nodes + part.nodes,
                old.gpus or part.gpus,
                old.default or default,
                old.up or part.up,
            )
        merged[name] = part
    return list(merged.values())


def _int(text: str) -> int:
    match = re.match(r"\d+", text.strip())
    return int(match.group()) if match else 0


def cluster_partitions(run: Callable = subprocess.run) -> list[Partition] | None:
    """The cluster's partitions, or None when ``sinfo`` is absent or does not answer (then nothing is
    checked and ``sbatch`` decides)."""
    if shutil.which("sinfo") is None:
        return None
    try:
        out = run(["sinfo", "-h", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"no answer in {SINFO_TIMEOUT_S} s" if isinstance(exc, subprocess.TimeoutExpired) else str(exc)
    else:
        if out.returncode == 0:
            return parse_sinfo(out.stdout)
        reason = (out.stderr or out.stdout or f"exit {out.returncode}").strip().splitlines()[-1]
    log.warning("sinfo: %s; the sweep's requests are not checked against the cluster's partitions", reason)
    return None


def _requested_gpus(params: dict) -> int:
    gpus = max(int(params.get("gpus_per_node") or 0), int(params.get("gpus_per_task") or 0))
    gres = str(params.get("gres") or "")
    if "gpu" in gres:
        gpus = max(gpus, _int(gres.rsplit(":", 1)[-1]) or 1)
    return gpus


def resource_problem(
    params: dict,
    partitions: Sequence[Partition] | None,
    prefix: str = "hydra.launcher.",
    partition_key: str | None = None,
) -> str | None:
    """One line naming the ``hydra.launcher.*`` setting no node of the job's partition can satisfy
    (and what to set instead), or None. ``params``: the launcher's settings (``mem_gb`` in GB,
    ``cpus_per_task`` per task, ``tasks_per_node``, ``nodes``, ``gpus_per_node``, ``gres``, ``partition``);
    ``prefix``: where the user sets them (``hydra.launcher.statistics.`` for the statistics set);
    ``partition_key``: where the partition comes from when not ``<prefix>partition`` (the statistics set's
    follows ``hydra.launcher.partition`` unless set)."""
    if not partitions:
        return None
    partition_key = partition_key or f"{prefix}partition"
    name = params.get("partition")
    if name:
        part = next((p for p in partitions if p.name == name), None)
        if part is None:
            return (
                f"{partition_key}={name}: no such partition on this cluster (it has: "
                f"{', '.join(p.name for p in partitions)})"
            )
    else:
        part = next((p for p in partitions if p.default), None)
        if part is None:
            return (
                f"{partition_key} is not set and the cluster has no default partition: choose one of "
                f"{', '.join(p.name for p in partitions)}"
            )
    where = f"partition '{part.name}'"
    gpus = _requested_gpus(params)
    if gpus > 0 and not part.gpus:
        with_gpus = [p.name for p in partitions if p.gpus]
        other = f", or a GPU partition: {prefix}partition={with_gpus[0]}" if with_gpus else ""
        ranks = int(params.get("tasks_per_node") or 1) * int(params.get("nodes") or 1)
        # several ranks keep their DDP trainer on CPU (gloo); trainer=cpu would be one process per job
        cpu_trainer = "trainer.accelerator=cpu" if ranks > 1 else "trainer=cpu"
        return (
            f"{prefix}gpus_per_node={gpus}: {where} has no GPUs (gres); set "
            f"{prefix}gpus_per_node=0 {cpu_trainer}{other}"
        )
    tasks = int(params.get("tasks_per_node") or 1)
    per_task = int(params.get("cpus_per_task") or 1)
    cpus = per_task * tasks
    if part.cpus and cpus > part.cpus:
        if per_task <= part.cpus and (tasks > part.cpus or per_task == 1):
            # the ranks per node are the excess (fewer CPUs per task cannot help): fewer per node, more nodes
            fit = part.cpus // per_task
            nodes = int(params.get("nodes") or 1)
            more_nodes = -(-tasks * nodes // fit)
            spread = (
                f" ({prefix}nodes={more_nodes} keeps {tasks * nodes} ranks)"
                if more_nodes <= part.nodes and more_nodes > nodes
                else ""
            )
            return (
                f"{prefix}tasks_per_node={tasks} x cpus_per_task={per_task} = {cpus} CPUs per node, but "
                f"the largest node of {where} has {part.cpus}: set {prefix}tasks_per_node={fit} or less"
                f"{spread}"
            )
        return (
            f"{prefix}cpus_per_task={params.get('cpus_per_task')} x tasks_per_node={tasks} = {cpus} CPUs "
            f"per node, but the largest node of {where} has {part.cpus}: set {prefix}cpus_per_task="
            f"{max(1, part.cpus // tasks)} or less"
        )
    mem_gb = params.get("mem_gb")
    if mem_gb and part.memory_mb and int(mem_gb) * 1024 > part.memory_mb:
        return (
            f"{prefix}mem_gb={mem_gb}: the largest node of {where} has {part.memory_mb / 1024:.1f} GB; "
            f"set {prefix}mem_gb={max(1, part.memory_mb // 1024)} or less"
        )
    nodes = int(params.get("nodes") or 1)
    if part.nodes and nodes > part.nodes:
        return f"{prefix}nodes={nodes}: {where} has {part.nodes} node(s); set {prefix}nodes={part.nodes}"
    return None


# launcher settings that ask for GPUs: a statistics-only job asks for none
GPU_SETTINGS = ("gpus_per_node", "gpus_per_task", "cpus_per_gpu", "mem_per_gpu")
# the settings of the statistics set (hydra.launcher.statistics.*), each replacing the configured one
STATISTICS_SETTINGS = ("partition", "timeout_min", "cpus_per_task", "mem_gb")


def statistics_parameters(params: dict, statistics: dict) -> dict:
    """The launcher settings of a job that needs no model forward: ``params`` (the configured set,
    ``hydra.launcher.*``) with the statistics set's ``partition``, ``timeout_min`` (minutes),
    ``cpus_per_task`` and ``mem_gb`` (GB), one task on one node, and no GPU (:data:`GPU_SETTINGS` None,
    a ``gres`` naming a GPU dropped; ``mem_per_cpu`` dropped where ``mem_gb`` is set: sbatch takes one)."""
    out = dict(params)
    out.update({k: statistics[k] for k in STATISTICS_SETTINGS if k in statistics})
    out.update(nodes=1, tasks_per_node=1, **dict.fromkeys(GPU_SETTINGS))
    if "gpu" in str(out.get("gres") or "").lower():
        out["gres"] = None
    if out.get("mem_gb") is not None:
        out["mem_per_cpu"] = None
    return out
