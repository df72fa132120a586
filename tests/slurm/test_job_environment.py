"""A job's trainer as SLURM starts it: one rank per task (faked SLURM variables; no cluster needed)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from speechbias.launch.entry import SLURM_ENVIRONMENT_NO_REQUEUE, job_trainer_config
from speechbias.launch.slurm.job_environment import SlurmTasks, process_rank, slurm_tasks
from speechbias.errors import ConfigError

DDP_SIM = {
    "_target_": "speechbias.launch.lightning_trainer.build_trainer",
    "_partial_": True,
    "accelerator": "cpu",
    "devices": 2,
    "strategy": "ddp_spawn",
}
DDP_GPU = {**DDP_SIM, "accelerator": "gpu", "devices": -1, "strategy": "ddp"}
CPU = {
    "_target_": "speechbias.launch.lightning_trainer.build_trainer",
    "_partial_": True,
    "accelerator": "cpu",
    "devices": 1,
}


def _tasks(ntasks, per_node=None, nodes=1):
    return SlurmTasks(job_id="5_0", ntasks=ntasks, tasks_per_node=per_node or ntasks, nodes=nodes, procid=0)


def test_slurm_variables_are_read_through_submitits_job_environment(monkeypatch):
    env = {
        "SLURM_JOB_ID": "17",
        "SLURM_ARRAY_JOB_ID": "16",
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_NTASKS": "4",
        "SLURM_NTASKS_PER_NODE": "2(x2)",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_PROCID": "3",
        "SLURM_JOB_NAME": "train",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    assert slurm_tasks() is None  # not a job the launcher submitted (an interactive allocation, plain srun)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")  # what submitit's sbatch script exports
    # job id of an array element: <array id>_<index>; 4 tasks on 2 nodes: 2 per node; rank 3
    assert slurm_tasks() == SlurmTasks(job_id="16_1", ntasks=4, tasks_per_node=2, nodes=2, procid=3)
    assert process_rank({"SLURM_PROCID": "3"}) == 3 and process_rank({"LOCAL_RANK": "1", "SLURM_PROCID": "0"}) == 1
    assert process_rank({}) == 0


@pytest.mark.parametrize("trainer", [DDP_SIM, DDP_GPU], ids=["ddp_sim", "ddp"])
def test_two_tasks_run_one_ddp_rank_each(trainer):
    cfg = job_trainer_config(OmegaConf.create(trainer), tasks=_tasks(4, per_node=2, nodes=2), multirun=True)
    assert (cfg.strategy, cfg.devices, cfg.num_nodes) == ("ddp", 2, 2)  # never ddp_spawn: SLURM started the ranks
    assert OmegaConf.to_container(cfg.plugins) == [SLURM_ENVIRONMENT_NO_REQUEUE]
    assert cfg.accelerator == trainer["accelerator"]


def test_several_tasks_with_a_one_process_trainer_is_one_line_naming_tasks_per_node():
    with pytest.raises(
        ConfigError,
        match=r"^hydra.launcher.tasks_per_node=2 starts 2 ranks, but this trainer runs "
        r"one process: use trainer=ddp",
    ):
        job_trainer_config(OmegaConf.create(CPU), tasks=_tasks(2), multirun=True)


def test_one_task_asking_for_two_devices_names_tasks_per_node(monkeypatch):
    with pytest.raises(
        ConfigError,
        match=r"^trainer.devices=2 asks for 2 ranks, but this SLURM job has one task: "
        r"set hydra.launcher.tasks_per_node=2",
    ):
        job_trainer_config(OmegaConf.create(DDP_SIM), tasks=_tasks(1), multirun=True)
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "1")  # devices=-1: the one GPU SLURM gave the job
    cfg = job_trainer_config(OmegaConf.create(DDP_GPU), tasks=_tasks(1), multirun=True)
    assert cfg.strategy == "ddp" and cfg.devices == -1
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "4")
    with pytest.raises(ConfigError, match="trainer.devices=-1 asks for 4 ranks"):
        job_trainer_config(OmegaConf.create(DDP_GPU), tasks=_tasks(1), multirun=True)


def test_outside_slurm_ddp_in_a_multirun_is_spawned_and_a_single_run_is_left_alone():
    assert job_trainer_config(OmegaConf.create(DDP_GPU), tasks=None, multirun=True).strategy == "ddp_spawn"
    assert job_trainer_config(OmegaConf.create(DDP_GPU), tasks=None, multirun=False).strategy == "ddp"
    assert "plugins" not in job_trainer_config(OmegaConf.create(CPU), tasks=None, multirun=True)
