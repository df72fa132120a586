"""Checks of a SLURM request against sinfo's view of the cluster, on sinfo output written out here; and
what a sweep says when sinfo does not answer (the real sinfo, pointed at a controller that is not there)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from speechbias.launch.slurm import resources
from speechbias.launch.slurm.resources import parse_sinfo, resource_problem

# sinfo -h -o '%P|%c|%m|%G|%D|%a' of a cluster with a default CPU partition (two node types) and a GPU one
SINFO = """cpu*|2|16000|(null)|1|up
cpu*|8|64000|(null)|3|up
gpu|32|256000|gpu:a100:4|2|up
"""
ONE_NODE = "debug*|2|16000|(null)|1|up\n"


def test_partitions_merge_node_types_into_the_largest_node():
    cpu, gpu = parse_sinfo(SINFO)
    assert (cpu.name, cpu.cpus, cpu.memory_mb, cpu.nodes, cpu.gpus, cpu.default) == ("cpu", 8, 64000, 4, False, True)
    assert (gpu.name, gpu.cpus, gpu.gpus, gpu.default) == ("gpu", 32, True, False)


def test_gpus_on_a_partition_without_gres_name_the_setting_and_the_gpu_partition():
    msg = resource_problem({"gpus_per_node": 1, "cpus_per_task": 1, "mem_gb": 2}, parse_sinfo(SINFO))
    assert msg.startswith("hydra.launcher.gpus_per_node=1: partition 'cpu' has no GPUs")
    assert "hydra.launcher.gpus_per_node=0" in msg and "hydra.launcher.partition=gpu" in msg
    assert (
        resource_problem({"gpus_per_node": 1, "partition": "gpu", "cpus_per_task": 8, "mem_gb": 32}, parse_sinfo(SINFO))
        is None
    )


def test_more_cpus_or_memory_than_the_largest_node_name_the_setting_and_what_fits():
    parts = parse_sinfo(ONE_NODE)
    cpus = resource_problem({"gpus_per_node": 0, "cpus_per_task": 8, "tasks_per_node": 1, "mem_gb": 2}, parts)
    assert cpus.startswith("hydra.launcher.cpus_per_task=8 x tasks_per_node=1 = 8 CPUs per node")
    assert "has 2" in cpus and "cpus_per_task=2 or less" in cpus
    two_tasks = resource_problem({"gpus_per_node": 0, "cpus_per_task": 2, "tasks_per_node": 2, "mem_gb": 2}, parts)
    assert "= 4 CPUs" in two_tasks and "cpus_per_task=1 or less" in two_tasks
    mem = resource_problem({"gpus_per_node": 0, "cpus_per_task": 1, "mem_gb": 32}, parts)
    assert mem.startswith("hydra.launcher.mem_gb=32: the largest node of partition 'debug' has 15.6 GB")
    assert "mem_gb=15 or less" in mem
    assert resource_problem({"gpus_per_node": 0, "cpus_per_task": 1, "mem_gb": 15}, parts) is None


def test_too_many_ranks_per_node_name_tasks_per_node_not_cpus_per_task():
    """4 ranks of 1 CPU on 2-CPU nodes: the excess is the ranks (cpus_per_task is already 1)."""
    params = {"gpus_per_node": 0, "cpus_per_task": 1, "tasks_per_node": 4, "mem_gb": 2}
    msg = resource_problem(params, parse_sinfo(ONE_NODE))
    assert msg == (
        "hydra.launcher.tasks_per_node=4 x cpus_per_task=1 = 4 CPUs per node, but the largest node of "
        "partition 'debug' has 2: set hydra.launcher.tasks_per_node=2 or less"
    )
    # where the partition has the nodes, spreading the ranks over them is the way to keep them all
    two_nodes = parse_sinfo("debug*|2|16000|(null)|2|up\n")
    assert resource_problem(params, two_nodes).endswith(
        "set hydra.launcher.tasks_per_node=2 or less (hydra.launcher.nodes=2 keeps 4 ranks)"
    )


def test_gpus_for_several_ranks_on_a_cpu_partition_keep_the_ddp_trainer():
    msg = resource_problem({"gpus_per_node": 2, "tasks_per_node": 2, "cpus_per_task": 1}, parse_sinfo(ONE_NODE))
    assert "set hydra.launcher.gpus_per_node=0 trainer.accelerator=cpu" in msg and "trainer=cpu" not in msg


def test_unknown_partition_and_no_answer():
    msg = resource_problem({"partition": "gpu"}, parse_sinfo(ONE_NODE))
    assert msg == "hydra.launcher.partition=gpu: no such partition on this cluster (it has: debug)"
    assert resource_problem({"gpus_per_node": 8, "mem_gb": 10**6}, None) is None  # sinfo silent: sbatch decides


def test_without_sbatch_the_slurm_launcher_says_so_in_one_line(tmp_path):
    """``hydra/launcher=slurm`` on a machine without SLURM: one line, exit 1 (submitit's traceback before)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"  # PATH with python only: no sbatch, sinfo or squeue
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = dict(os.environ, PATH=str(bin_dir), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    proc = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            "-m",
            "upstream=fbank",
            "hydra/launcher=slurm",
            "logger=none",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [
        "error: hydra/launcher=slurm needs SLURM's sbatch on PATH (run on the cluster's login node); "
        "on this machine use hydra/launcher=parallel"
    ], proc.stderr[-2000:]


def test_a_cluster_whose_sinfo_does_not_answer_is_said_in_one_warning(caplog):
    def times_out(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    def refused(*args, **kwargs):
        return subprocess.CompletedProcess(
            args[0], 1, "", "sinfo: error: x\nslurm_load_partitions: Unable to contact\n"
        )

    with caplog.at_level("WARNING", logger=resources.__name__):
        assert resources.cluster_partitions(run=times_out) is None
        assert resources.cluster_partitions(run=refused) is None
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"sinfo: no answer in {resources.SINFO_TIMEOUT_S} s; the sweep's requests are not checked against the "
        "cluster's partitions",
        "sinfo: slurm_load_partitions: Unable to contact; the sweep's requests are not checked against the "
        "cluster's partitions",
    ]


def test_the_real_sinfo_without_a_controller_gives_none_and_its_own_reason(tmp_path, monkeypatch, caplog):
    if shutil.which("sinfo") is None:
        pytest.skip("no sinfo here")
    # a controller on a port nothing listens on: the real client fails at once
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=none\nSlurmctldHost=localhost\nSlurmctldPort=9\nAuthType=auth/none\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=localhost Default=YES\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with caplog.at_level("WARNING", logger=resources.__name__):
        assert resources.cluster_partitions() is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("sinfo: ") and message.endswith("not checked against the cluster's partitions")
