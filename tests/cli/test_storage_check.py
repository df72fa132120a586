"""The pre-launch storage estimate and the setting a failed write names, against sizes derived by hand."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from speechbias.errors import StorageError
from speechbias.fileio.atomic_file import register_storage_setting, storage_error, storage_setting
from speechbias.launch.storage_check import Need, check_free_space, estimate_writes, sweep_needs


def _cfg(tmp_path, task="speat", **over):
    manifest = tmp_path / "m.csv"
    manifest.write_text("clip_id,path,role\na,a.wav,X\nb,b.wav,Y\nc,/nowhere/c.wav,A\n")
    base = {
        "task": {"name": task},
        "upstream": {"_target_": "speechbias.upstream.classical.FbankUpstream", "n_mels": 80},
        "bias_test": {"manifest": str(manifest)},
        "paths": {"cache_dir": str(tmp_path / "cache")},
        "lr": 1e-4,
    }
    return OmegaConf.merge(base, over)


def test_cache_estimate_is_an_entry_and_an_index_record_per_clip_not_cached(tmp_path):
    block = os.statvfs(tmp_path).f_frsize
    needs = estimate_writes(_cfg(tmp_path), tmp_path / "run")
    cache = next(n for n in needs if n.folder == tmp_path / "cache")
    # 3 clips, none indexed: each an entry of 3 statistics x 1 layer x 80 mels float32 (+512 header) and
    # an index record, each rounded up to whole blocks
    entry = -(-(3 * 80 * 4 + 512) // block) * block
    assert cache.total == 3 * entry + 3 * block
    assert cache.setting.startswith("paths.cache_dir=")


def test_the_estimate_resolves_only_the_values_that_name_tables(tmp_path):
    """Its clips come from the ``*manifest`` / ``*ratings`` values (interpolated ones resolved); no other
    value is resolved, and a node interpolated elsewhere (``task.run.bias_test: ${bias_test}``) is read
    where it is."""
    ratings = tmp_path / "r.csv"
    ratings.write_text("path,valence\nd.wav,0.5\n")
    resolved: list[str] = []
    OmegaConf.register_new_resolver("storage_test_seen", lambda key: resolved.append(key) or key, replace=True)
    cfg = _cfg(tmp_path, seed="${storage_test_seen:seed}", data={"ratings": "${storage_test_seen:ratings}"})
    cfg.data.ratings = str(ratings).replace("r.csv", "${storage_test_seen:r.csv}")
    cfg.task.run = {"bias_test": "${bias_test}", "name": "${storage_test_seen:name}"}
    needs = estimate_writes(cfg, tmp_path / "run")
    cache = next(n for n in needs if n.folder == tmp_path / "cache")
    assert resolved == ["r.csv"]  # the ratings table's name only
    assert "4 cache entries" in " ".join(cache.parts)  # a.wav, b.wav, /nowhere/c.wav, d.wav


def test_train_estimate_holds_two_checkpoints_of_each_head(tmp_path):
    block = os.statvfs(tmp_path).f_frsize
    one = estimate_writes(_cfg(tmp_path, task="train_ser"), tmp_path / "run")[0].parts["checkpoints"]
    three = estimate_writes(_cfg(tmp_path, task="train_ser", lr=[1e-3, 1e-4, 1e-5]), tmp_path / "run")[0]
    params = 1 + 80 * 256 + 2 * 256 + 1  # layer weight, Linear(80, 256), Linear(256, 1)
    assert one == 2 * (-(-(12 * params + (64 << 10)) // block) * block)  # weights + Adam's 2 moments, float32
    assert three.parts["checkpoints"] == 2 * (-(-(12 * 3 * params + (64 << 10)) // block) * block)


def test_sweep_estimate_counts_each_upstreams_clips_once_and_every_jobs_files(tmp_path):
    """Two tests sharing clips b and c on one upstream (2 and 3 jobs alike: e.g. lr or aggregation swept), and
    the first test on a second upstream: 4 distinct clips on the first upstream, 3 on the second, 6 jobs."""
    block = os.statvfs(tmp_path).f_frsize
    first = _cfg(tmp_path)
    (tmp_path / "m2.csv").write_text("clip_id,path,role\nb,b.wav,X\nc,/nowhere/c.wav,Y\nd,d.wav,A\n")
    second = OmegaConf.merge(first, {"bias_test": {"manifest": str(tmp_path / "m2.csv")}})
    other = OmegaConf.merge(first, {"upstream": {"n_mels": 40}})
    needs = sweep_needs([(first, 2), (second, 3), (other, 1)], tmp_path / "sweep")
    assert needs[0].folder == tmp_path / "sweep" and needs[0].setting.startswith("hydra.sweep.dir=")
    assert needs[0].parts == {"run files of 6 jobs": 6 * (256 << 10)}
    entry80, entry40 = (-(-(3 * mels * 4 + 512) // block) * block for mels in (80, 40))
    assert [n.total for n in needs[1:]] == [4 * entry80 + 4 * block, 3 * entry40 + 3 * block]
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    with pytest.raises(StorageError, match="this sweep will write about") as err:
        check_free_space([Need(tmp_path / "sweep", "hydra.sweep.dir=...", {"x": free + (1 << 30)})], what="this sweep")
    assert "\n" not in str(err.value)


def test_a_run_that_does_not_fit_is_one_line_naming_sizes_and_settings(tmp_path):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    with pytest.raises(StorageError) as err:
        check_free_space([Need(tmp_path / "run", "hydra.run.dir=...", {"run files": free + (1 << 30)})])
    text = str(err.value)
    assert "\n" not in text and "hydra.run.dir=..." in text and "storage_check.enabled=false" in text
    check_free_space([Need(tmp_path / "run", "x", {"run files": 1})])  # fits: nothing raised


def test_a_failed_write_names_the_setting_of_the_innermost_registered_folder(tmp_path):
    register_storage_setting(tmp_path, "outer=...")
    register_storage_setting(tmp_path / "cache", "paths.cache_dir=...")
    assert storage_setting(tmp_path / "cache" / "stats" / "x.safetensors") == "paths.cache_dir=..."
    assert storage_setting(tmp_path / "run" / "results.json") == "outer=..."
    error = storage_error(tmp_path / "cache" / "e", OSError(28, "No space left on device"))
    assert isinstance(error, StorageError) and "paths.cache_dir=..." in str(error)
