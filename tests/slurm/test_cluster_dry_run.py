"""``hydra.launcher.dry_run=true`` prints the sbatch script the same command then submits: on the real
cluster, a dry run (nothing submitted) and the real sweep of the same command, the printed script compared
with the one submitit wrote for the submitted array. Slow; skipped where sbatch does not answer."""

from __future__ import annotations

import pytest

from slurm.cluster import CPU_JOB, job_ids, needs_cluster, run

pytestmark = [pytest.mark.slow, needs_cluster]

SWEEP = ["-m", "upstream=fbank,mfcc", "bias_test=demo_voice", "logger=none", "speat.n_permutations=2000"]


def test_the_dry_runs_sbatch_script_is_the_one_the_same_command_submits(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    overrides = [*SWEEP, *CPU_JOB, f"hydra.sweep.dir={sweep}"]
    dry = run("evaluate.py", *overrides, "hydra.launcher.dry_run=true", cache=cache)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_ids(sweep) == [] and not (sweep / ".submitit").exists()  # nothing submitted
    printed = dry.stdout[dry.stdout.index("#!/bin/bash") :].rstrip("\n")
    real = run("evaluate.py", *overrides, cache=cache)
    assert real.returncode == 0, real.stderr[-3000:]
    ids = job_ids(sweep)
    assert len(ids) == 2 and len({i.split("_")[0] for i in ids}) == 1  # one array of the two jobs
    array = ids[0].split("_")[0]
    (script,) = sweep.glob(f".submitit/{array}*/{array}*_submission.sh")
    # byte for byte (the script names its folders by %j / %A_%a, not by the ids SLURM then gives)
    assert script.read_text().rstrip("\n") == printed
