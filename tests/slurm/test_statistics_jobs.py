"""Which jobs need no model forward (speechbias.launch.slurm.statistics_jobs) and the resources they get,
decided on composed job configs against a real feature cache in a temporary folder; no cluster needed."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from speechbias.features.cache import ClipStatistics, FeatureCache
from speechbias.launch.slurm.resources import statistics_parameters
from speechbias.launch.slurm.statistics_jobs import ForwardNeeds, decision_key

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def demo(tmp_path) -> Path:
    """A copy of the demo_voice test's manifest and clips (their mtimes are the test's to change)."""
    folder = tmp_path / "demo"
    (folder / "audio").mkdir(parents=True)
    shutil.copy(REPO / "experiments" / "demo" / "demo_voice.csv", folder)
    for clips in ("demo_voice", "attributes"):
        shutil.copytree(REPO / "experiments" / "demo" / "audio" / clips, folder / "audio" / clips)
    return folder


def job(tmp_path: Path, demo: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return compose(
            "evaluate",
            overrides=[f"paths.cache_dir={tmp_path / 'cache'}", f"paths.demo_dir={demo}", *overrides],
        )


def clip_paths(demo: Path) -> list[Path]:
    return [demo / p for p in pd.read_csv(demo / "demo_voice.csv")["path"]]


def warm(tmp_path: Path, demo: Path, upstream: str, skip: int | None = None) -> FeatureCache:
    """Every demo clip given an audio-index record and an entry under ``upstream``'s fingerprint (taken
    from the upstream built from its config, as extraction builds it), but clip ``skip``'s entry."""
    cache = FeatureCache(tmp_path / "cache")
    fingerprint = instantiate(job(tmp_path, demo, f"upstream={upstream}").upstream).fingerprint
    rng = np.random.default_rng(0)
    for i, path in enumerate(clip_paths(demo)):
        sha = hashlib.sha256(path.name.encode()).hexdigest()  # any stable value: the index maps file -> it
        cache.remember_audio(path, sha, 16000)
        if i != skip:
            stats = rng.standard_normal((3, 2, 4)).astype(np.float32)
            cache.put(fingerprint, sha, ClipStatistics(mean=stats[0], min=stats[1], max=stats[2], n_frames=5))
    return cache


def test_a_speat_job_whose_every_clip_is_cached_needs_no_forward(tmp_path, demo):
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))  # cold
    warm(tmp_path, demo, "tiny_wav2vec2")
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    # a GPU trainer of one process: the warm run builds no Trainer
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2", "trainer=gpu"))
    # another upstream's entries are not this one's
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_hubert"))


def test_one_clip_without_its_entry_or_with_a_changed_file_needs_a_forward(tmp_path, demo):
    warm(tmp_path, demo, "tiny_wav2vec2", skip=3)
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    warm(tmp_path, demo, "tiny_wav2vec2")
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    changed = clip_paths(demo)[7]
    stat = changed.stat()
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched: its record no longer holds
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))


def test_jobs_of_several_ranks_or_other_tasks_keep_the_configured_resources(tmp_path, demo):
    warm(tmp_path, demo, "tiny_wav2vec2")
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2", "trainer=ddp_sim"))
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2", "task=wer_disparity"))


def test_a_weight_free_upstream_needs_no_gpu_with_a_cpu_trainer(tmp_path, demo):
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=fbank"))  # cold, trainer=cpu
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=mfcc"))
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=fbank", "trainer=gpu"))  # cold, GPU
    warm(tmp_path, demo, "fbank")
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=fbank", "trainer=gpu"))  # warm


def test_stimuli_not_built_yet_count_as_needing_a_forward_and_are_not_built(tmp_path, demo):
    config = job(tmp_path, demo, "upstream=tiny_wav2vec2", "bias_test=female_male", f"paths.data_root={tmp_path}")
    assert not ForwardNeeds().statistics_only(config)
    assert not Path(config.bias_test.manifest).exists()


def test_the_decision_key_drops_only_keys_that_cannot_change_the_decision():
    overrides = [
        "upstream=fbank",
        "aggregation=max_q3",
        "speat.n_permutations=10",
        "seed=3",
        "logger=none",
        "force=true",
    ]
    assert decision_key(overrides) == ("upstream=fbank", "seed=3")


def test_the_statistics_set_replaces_the_resources_and_asks_for_no_gpu():
    configured = {
        "timeout_min": 240,
        "cpus_per_task": 8,
        "gpus_per_node": 4,
        "tasks_per_node": 4,
        "nodes": 2,
        "mem_gb": 32,
        "partition": "gpu",
        "gres": "gpu:a100:4",
        "cpus_per_gpu": 4,
        "mem_per_cpu": 4,
        "account": "lab",
        "additional_parameters": {"mail-type": "END"},
    }
    stats = statistics_parameters(
        configured, {"enabled": True, "partition": "cpu", "timeout_min": 30, "cpus_per_task": 2, "mem_gb": 8}
    )
    assert stats == {
        "timeout_min": 30,
        "cpus_per_task": 2,
        "gpus_per_node": None,
        "gpus_per_task": None,
        "cpus_per_gpu": None,
        "mem_per_gpu": None,
        "tasks_per_node": 1,
        "nodes": 1,
        "mem_gb": 8,
        "partition": "cpu",
        "gres": None,
        "mem_per_cpu": None,
        "account": "lab",
        "additional_parameters": {"mail-type": "END"},
    }
    assert configured["gpus_per_node"] == 4  # the configured set is left as it was


def test_the_launcher_submits_statistics_jobs_as_their_own_group_in_job_order():
    from hydra_plugins.speechbias_launcher.slurm_launcher import SpeechbiasSlurmLauncher

    launcher = SpeechbiasSlurmLauncher(
        submitit_folder="x",
        timeout_min=240,
        cpus_per_task=8,
        gpus_per_node=1,
        mem_gb=32,
        partition=None,
        statistics={"enabled": True, "partition": None, "timeout_min": 20, "cpus_per_task": 2, "mem_gb": 4},
    )
    launcher.statistics_jobs = frozenset({5, 7})
    args = [([f"o={n}"], "hydra.sweep.dir", n, f"job_id_for_{n}", {}) for n in range(4, 9)]
    (configured, configured_jobs), (settings, statistics_jobs) = launcher.submission_groups(args)
    assert (configured, configured_jobs, statistics_jobs) == ({}, [0, 2, 4], [1, 3])
    # what differs from the configured set (settings it leaves unset stay unset)
    assert settings == {
        "timeout_min": 20,
        "cpus_per_task": 2,
        "mem_gb": 4,
        "gpus_per_node": None,
        "nodes": 1,
        "tasks_per_node": 1,
    }


def test_a_cold_job_builds_no_upstream_to_be_decided(tmp_path, demo, monkeypatch):
    from speechbias.upstream.deferred import DeferredUpstream

    built = []
    original = DeferredUpstream.build
    monkeypatch.setattr(DeferredUpstream, "build", lambda self: built.append(self.target) or original(self))
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    assert built == []  # no clip has an audio-index record: cold whatever the fingerprint
    cache = FeatureCache(tmp_path / "cache")
    for path in clip_paths(demo):  # what a sweep's pre-flight clip check leaves: records, no entries
        cache.remember_audio(path, hashlib.sha256(path.name.encode()).hexdigest(), 16000)
    assert not ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    assert built == []  # no upstream has an entry of the first clip
    warm(tmp_path, demo, "tiny_wav2vec2")
    assert ForwardNeeds().statistics_only(job(tmp_path, demo, "upstream=tiny_wav2vec2"))
    assert built == []  # its fingerprint from its config (upstream/hf_identity): nothing built


def test_a_list_job_needs_every_listed_test_cached(tmp_path, demo):
    """``bias_test=[demo_accent,demo_voice]``: the job's ``bias_test`` node is the merge of the two (the
    last wins), but the job reads both tests' clips: the last test cached alone is not enough."""
    shutil.copy(REPO / "experiments" / "demo" / "demo_accent.csv", demo)
    shutil.copytree(REPO / "experiments" / "demo" / "audio" / "demo_accent", demo / "audio" / "demo_accent")

    def list_job():
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
            return compose(
                "evaluate",
                overrides=[
                    f"paths.cache_dir={tmp_path / 'cache'}",
                    f"paths.demo_dir={demo}",
                    "upstream=tiny_wav2vec2",
                    "bias_test=[demo_accent,demo_voice]",
                ],
                return_hydra_config=True,
            )

    warm(tmp_path, demo, "tiny_wav2vec2")  # demo_voice's clips (with the attributes A, B)
    assert not ForwardNeeds().statistics_only(list_job())
    accent = [demo / p for p in pd.read_csv(demo / "demo_accent.csv")["path"]]
    cache = FeatureCache(tmp_path / "cache")
    fingerprint = instantiate(job(tmp_path, demo, "upstream=tiny_wav2vec2").upstream).fingerprint
    stats = np.zeros((3, 2, 4), dtype=np.float32)
    for path in accent:
        sha = hashlib.sha256(path.name.encode()).hexdigest()
        cache.remember_audio(path, sha, 16000)
        cache.put(fingerprint, sha, ClipStatistics(mean=stats[0], min=stats[1], max=stats[2], n_frames=5))
    assert ForwardNeeds().statistics_only(list_job())
