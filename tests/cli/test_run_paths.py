"""Where a run's folders resolve (the project root from any working directory) and the line that ends a run."""

from __future__ import annotations

import os

from hydra import compose, initialize_config_dir

from speechbias.launch.entry import offline_wandb_runs, register_project_root, results_line


def _paths(conf_dir, overrides=()):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("evaluate", overrides=list(overrides), return_hydra_config=True)
    return cfg.paths


def test_the_project_root_is_the_registered_folder_unless_env_or_override_say_otherwise(
    conf_dir, tmp_path, monkeypatch
):
    monkeypatch.delenv("PROJECT_ROOT", raising=False)
    monkeypatch.delenv("SPEECHBIAS_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    try:
        register_project_root("/opt/speechbias")
        paths = _paths(conf_dir)
        assert paths.root_dir == "/opt/speechbias"
        assert paths.demo_dir == "/opt/speechbias/experiments/demo"
        assert paths.multirun_root == "/opt/speechbias/multirun"
        assert paths.cache_dir == "/opt/speechbias/.cache/speechbias"
        assert _paths(conf_dir, ["paths.root_dir=/elsewhere"]).multirun_root == "/elsewhere/multirun"
        monkeypatch.setenv("PROJECT_ROOT", "/from/env")
        assert _paths(conf_dir).demo_dir == "/from/env/experiments/demo"
    finally:
        register_project_root()
    monkeypatch.delenv("PROJECT_ROOT")
    assert _paths(conf_dir).root_dir == str(tmp_path)  # nothing registered: the working directory


def test_the_last_line_names_the_results_and_the_offline_wandb_runs(tmp_path):
    out = tmp_path / "run"
    (out / "wandb" / "offline-run-20240101_000000-old").mkdir(parents=True)
    os.utime(out / "wandb" / "offline-run-20240101_000000-old", (1000, 1000))
    assert results_line(out, since=5000) == f"results in {out}"
    new = out / "wandb" / "offline-run-20240101_000100-abc"
    new.mkdir()
    (out / "wandb" / "run-20240101_000100-online").mkdir()  # an online run needs no sync
    assert offline_wandb_runs(out, since=5000) == [new]
    assert results_line(out, since=5000) == f"results in {out}; W&B offline: wandb sync {new}"
