"""A multirun tells its jobs how many jobs their process runs (speechbias.launch.sweep_workload): all of them
under the basic launcher, each worker's share under the parallel one, one under SLURM."""

from __future__ import annotations

import os

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from speechbias.launch.sweep_workload import (
    BASIC_LAUNCHER,
    JOBLIB_LAUNCHER,
    JOBS_PER_PROCESS_ENV,
    SweepWorkloadCallback,
    jobs_per_process,
    share_of_jobs,
)


def test_each_launcher_gives_its_processes_their_share():
    assert share_of_jobs(96, BASIC_LAUNCHER) == 96  # one after another in the sweep's process
    assert share_of_jobs(96, JOBLIB_LAUNCHER, 2) == 48
    assert share_of_jobs(97, JOBLIB_LAUNCHER, 2) == 49  # at most
    assert share_of_jobs(96, JOBLIB_LAUNCHER, -1) == -(-96 // (os.cpu_count() or 1))  # one worker per core
    assert share_of_jobs(96, "hydra_plugins.speechbias_launcher.slurm_launcher.SpeechbiasSlurmLauncher") == 1
    assert share_of_jobs(1, BASIC_LAUNCHER) == 1


@pytest.mark.parametrize("launcher, expected", [(None, "6"), ("parallel", "3")])
def test_the_callback_exports_the_share_while_the_multirun_runs(conf_dir, monkeypatch, launcher, expected):
    monkeypatch.delenv(JOBS_PER_PROCESS_ENV, raising=False)
    assert jobs_per_process() == 1  # a single run
    overrides = [f"hydra/launcher={launcher}", "hydra.launcher.n_jobs=2"] if launcher else []
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides, return_hydra_config=True)
        with open_dict(cfg):  # `python evaluate.py -m upstream=fbank,mfcc aggregation=mean_sum,max_q3,min_last`
            cfg.hydra.overrides.task = ["upstream=fbank,mfcc", "aggregation=mean_sum,max_q3,min_last"]
        callback = SweepWorkloadCallback()
        callback.on_multirun_start(cfg)
    assert os.environ[JOBS_PER_PROCESS_ENV] == expected and jobs_per_process() == int(expected)
    callback.on_multirun_end(cfg)
    assert JOBS_PER_PROCESS_ENV not in os.environ
