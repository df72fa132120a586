"""Jobs that need no model forward ask SLURM for no GPU: on the real cluster, a sweep whose jobs of one
upstream are all cached runs them as an array of their own with the ``statistics`` resources (read back
from ``scontrol show job`` and the sbatch scripts), the other jobs with the configured ones, in one
table in Hydra's job order. Slow; skipped where sbatch does not answer."""

from __future__ import annotations

import pickle
import re
import subprocess

import pandas as pd
import pytest
from omegaconf import OmegaConf

from slurm.cluster import CPU_JOB, job_ids, needs_cluster, run

pytestmark = [pytest.mark.slow, needs_cluster]

FAST = ["logger=none", "speat.n_permutations=2000"]
# a statistics set that differs from CPU_JOB's configured one (2 GB, the default 240 min) in memory and time
STATISTICS = ["hydra.launcher.statistics.mem_gb=3", "hydra.launcher.statistics.timeout_min=17"]


def scontrol(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields (the cluster keeps a finished job for MinJobAge=300 s; it has no sacct)."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def submitted_overrides(sweep, job_id: str) -> list[str]:
    """The overrides submitit pickled for a job (its first positional argument)."""
    with open(sweep / ".submitit" / job_id / f"{job_id}_submitted.pkl", "rb") as f:
        return list(pickle.load(f).args[0])


def test_cached_jobs_are_submitted_without_gpus_with_the_statistics_resources(tmp_path):
    cache = tmp_path / "cache"
    warmup = run(
        "evaluate.py",
        "-m",
        "upstream=tiny_wav2vec2",
        "bias_test=demo_voice,demo_accent",
        *FAST,
        f"hydra.sweep.dir={tmp_path / 'warmup'}",
        cache=cache,
    )
    assert warmup.returncode == 0, warmup.stderr[-3000:]
    sweep = tmp_path / "sweep"
    # jobs interleave: hubert (cold), wav2vec2 (cached), hubert, wav2vec2
    proc = run(
        "evaluate.py",
        "-m",
        "bias_test=demo_voice,demo_accent",
        "upstream=tiny_hubert,tiny_wav2vec2",
        *FAST,
        *CPU_JOB,
        *STATISTICS,
        f"hydra.sweep.dir={sweep}",
        cache=cache,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 of 4 job(s) need no model forward" in proc.stdout + proc.stderr
    in_order = [
        f"bias_test={test},speat.n_permutations=2000,upstream={upstream}"
        for test in ("demo_voice", "demo_accent")
        for upstream in ("tiny_hubert", "tiny_wav2vec2")
    ]
    rows = pd.read_csv(sweep / "sweep_status.csv")  # one table (sorted by folder) for both arrays
    assert sorted(rows["job"]) == sorted(in_order) and list(rows["status"]) == ["ok"] * 4
    # Hydra's job numbers, as one array would have them
    assert [OmegaConf.load(sweep / job / ".hydra" / "hydra.yaml").hydra.job.num for job in in_order] == [0, 1, 2, 3]
    forwards = {job: pd.read_csv(sweep / job / "results.csv")["n_upstream_forwards"][0] for job in rows["job"]}
    arrays = {}
    for job_id in job_ids(sweep):
        upstream = next(o.split("=")[1] for o in submitted_overrides(sweep, job_id) if o.startswith("upstream="))
        fields = scontrol(job_id)
        arrays.setdefault(upstream, set()).add(fields.get("ArrayJobId", job_id))
        if upstream == "tiny_wav2vec2":  # every clip cached: the statistics set, no GPU
            assert (fields["TimeLimit"], fields["MinMemoryNode"], fields["NumCPUs"]) == ("00:17:00", "3G", "2")
            assert "gpu" not in fields.get("TresPerNode", "") and "gpu" not in fields["TRES"], fields
        else:  # the configured set (CPU_JOB: GPUs 0, 1 CPU, 2 GB; the default 240 min)
            assert (fields["TimeLimit"], fields["MinMemoryNode"], fields["NumCPUs"]) == ("04:00:00", "2G", "1")
            assert fields.get("TresPerNode") == "gres:gpu:0", fields
    # one array per resource set, two jobs each
    assert len(arrays["tiny_wav2vec2"]) == len(arrays["tiny_hubert"]) == 1
    assert arrays["tiny_wav2vec2"] != arrays["tiny_hubert"]
    scripts = [p.read_text() for p in (sweep / ".submitit").glob("*/*_submission.sh")]
    statistics_script = next(s for s in scripts if "--time=17" in s)
    configured_script = next(s for s in scripts if "--time=240" in s)
    assert "gpu" not in statistics_script and "#SBATCH --mem=3GB" in statistics_script
    assert "#SBATCH --gpus-per-node=0" in configured_script and "#SBATCH --mem=2GB" in configured_script
    # the decision matched what the jobs did: the cached ones ran no forward, the others extracted
    for job, n in forwards.items():
        assert (n == 0) == job.endswith("upstream=tiny_wav2vec2"), forwards


def test_a_sweep_needing_no_forward_runs_with_the_gpu_defaults_on_a_cluster_without_gpus(tmp_path):
    """The launcher's defaults (1 GPU, 8 CPUs, 32 GB) fit no node here; weight-free upstreams with the
    CPU trainer need no GPU, so their jobs run with the statistics set (2 CPUs, 8 GB)."""
    sweep = tmp_path / "sweep"
    proc = run(
        "evaluate.py",
        "-m",
        "upstream=fbank,mfcc",
        "bias_test=demo_voice",
        *FAST,
        "hydra/launcher=slurm",
        "hydra.launcher.poll_s=1",
        f"hydra.sweep.dir={sweep}",
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert list(pd.read_csv(sweep / "sweep_status.csv")["status"]) == ["ok", "ok"]
    for job_id in job_ids(sweep):
        fields = scontrol(job_id)
        assert (fields["MinMemoryNode"], fields["NumCPUs"], fields["TimeLimit"]) == ("8G", "2", "01:00:00")
