"""The SLURM cluster fixture: tests that use it skip where ``sbatch`` does not answer."""

from __future__ import annotations

import pytest

from slurm.cluster import nodes_answer, run, sbatch_answers, two_nodes_answer

# optimiser steps of the train.py runs compared here: long enough that a requeue lands mid-training
TRAIN_STEPS = 2000


@pytest.fixture
def slurm_cluster() -> None:
    if not sbatch_answers():
        pytest.skip("no SLURM cluster answers here (CI starts one with .ci/slurm/start)")


@pytest.fixture
def two_node_cluster() -> None:
    if not two_nodes_answer():
        pytest.skip("no two-node SLURM cluster answers here (CI starts one with .ci/slurm/start --nodes 2)")


@pytest.fixture
def three_node_cluster() -> None:
    if not nodes_answer(3):
        pytest.skip("no three-node SLURM cluster answers here (.ci/slurm/start --nodes 3)")


@pytest.fixture(scope="session")
def one_process_train(tmp_path_factory):
    """``python train.py`` (demo valence set, fbank) in one process without SLURM: the reference run."""
    if not sbatch_answers():
        pytest.skip("no SLURM cluster answers here")
    root = tmp_path_factory.mktemp("one_process_train")
    proc = run(
        "train.py",
        "upstream=fbank",
        f"max_steps={TRAIN_STEPS}",
        "logger=none",
        f"hydra.run.dir={root / 'run'}",
        cache=root / "cache",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "run"
