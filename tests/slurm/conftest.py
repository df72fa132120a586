"""The SLURM cluster fixture: tests that use it skip where ``sbatch`` does not answer."""

from __future__ import annotations

import pytest

from slurm.cluster import sbatch_answers


@pytest.fixture
def slurm_cluster() -> None:
    if not sbatch_answers():
        pytest.skip("no SLURM cluster answers here (CI starts one with .ci/slurm/start)")
