"""A finished run folder is reused only for the config that produced it (run_markers' digest)."""

from __future__ import annotations

import json
import logging

from omegaconf import OmegaConf

from speechbias.tasks.run_markers import (
    RUN_DIGEST_FILE,
    config_values,
    finished_marker,
    finished_results,
    record_run_digest,
    without_keys,
)


def _cfg(tmp_path, **over):
    base = {
        "task": {
            "name": "speat",
            "run": {"aggregation": "${aggregation}", "writer": {"output_dir": "${paths.output_dir}"}},
        },
        "aggregation": {"temporal": "mean", "layer": "sum"},
        "speat": {"n_permutations": 1000},
        "paths": {"output_dir": str(tmp_path / "run"), "data_root": "/data", "cache_dir": str(tmp_path / "c")},
        "logger": {"kind": "wandb"},
        "force": False,
        "seed": 0,
    }
    return OmegaConf.merge(base, over)


def test_config_values_resolve_and_leave_presentation_keys_out(tmp_path):
    values = config_values(_cfg(tmp_path))
    assert values["task.run.aggregation.layer"] == '"sum"'  # an interpolation, resolved
    assert values["paths.data_root"] == '"/data"'  # decides the stimuli: kept
    for key in ("logger.kind", "paths.output_dir", "paths.cache_dir", "force", "task.run.writer.output_dir"):
        assert key not in values


def test_config_values_of_a_few_keys_patch_those_of_a_config_that_differs_only_there(tmp_path):
    # a list job's pair: its test's values, walked once, with the keys the pair sets walked again
    base = _cfg(tmp_path)
    pair = _cfg(tmp_path, aggregation={"temporal": "max", "layer": "q3", "extra": [1, 2]}, seed=3)
    keys = ("aggregation", "task.run.aggregation", "seed", "paths.output_dir")  # every key that differs
    patched = {**without_keys(config_values(base), keys), **config_values(pair, only=keys)}
    assert patched == config_values(pair)
    assert patched["aggregation.extra[1]"] == "2" and patched["task.run.aggregation.layer"] == '"q3"'
    assert set(config_values(pair, only=("aggregation",))) == {
        "aggregation.temporal",
        "aggregation.layer",
        "aggregation.extra[0]",
        "aggregation.extra[1]",
    }


def test_config_values_of_a_resolved_config_are_those_of_its_config(tmp_path):
    # a list job's pair config is a resolved dict: its values as the config's, every list walked into
    cfg = _cfg(tmp_path, aggregation={"temporal": "max", "layer": "q3", "extra": [1, {"a": None}], "none": {}})
    plain = OmegaConf.to_container(cfg, resolve=True)
    values = config_values(plain)
    assert values["task.run.aggregation.layer"] == '"q3"' and values["aggregation.extra[0]"] == "1"
    assert values["aggregation.extra[1].a"] == "null" and values["aggregation.none"] == "{}"
    assert "paths.output_dir" not in values and "logger.kind" not in values
    assert values == config_values(cfg)
    only = ("aggregation", "task.run.aggregation")
    assert config_values(plain, only=only) == {k: v for k, v in values.items() if "aggregation" in k}


def _finish(tmp_path, cfg):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "results.json").write_text("[{}]")
    record_run_digest(cfg, run)
    return run


def test_same_config_is_reused_even_with_other_presentation_keys(tmp_path):
    run = _finish(tmp_path, _cfg(tmp_path))
    other_place = _cfg(tmp_path, logger={"kind": "none"}, paths={"cache_dir": "/elsewhere"})
    assert finished_results(other_place, run) == run / "results.json"


def test_another_config_is_recomputed_with_one_line_naming_the_changed_keys(tmp_path, caplog):
    run = _finish(tmp_path, _cfg(tmp_path))
    changed = _cfg(tmp_path, aggregation={"temporal": "max", "layer": "q3"})
    with caplog.at_level(logging.INFO, logger="speechbias"):
        assert finished_results(changed, run) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "aggregation.layer: sum -> q3" in lines[0] and "aggregation.temporal: mean -> max" in lines[0]
    assert "task.run" not in lines[0]  # the task's own copy of the same values is not listed twice
    # the stale digest is gone, so the task's own check does not skip either
    assert not (run / RUN_DIGEST_FILE).exists() and finished_marker("speat", run) is None


def test_trainer_precision_changes_the_digest_its_devices_do_not(tmp_path, caplog):
    """The trainer is presentation (devices, strategy, progress bar) except its numeric precision."""
    trainer = {"accelerator": "cpu", "devices": 1, "precision": "32-true", "enable_progress_bar": True}
    run = _finish(tmp_path, _cfg(tmp_path, trainer=trainer))
    two_devices = dict(trainer, devices=2, strategy="ddp", enable_progress_bar=False)
    assert finished_results(_cfg(tmp_path, trainer=two_devices), run) == run / "results.json"
    with caplog.at_level(logging.INFO, logger="speechbias"):
        assert finished_results(_cfg(tmp_path, trainer=dict(trainer, precision="bf16-mixed")), run) is None
    assert "trainer.precision: 32-true -> bf16-mixed" in caplog.text


def test_data_root_alone_changes_the_digest(tmp_path, caplog):
    run = _finish(tmp_path, _cfg(tmp_path))
    with caplog.at_level(logging.WARNING, logger="speechbias"):
        assert finished_results(_cfg(tmp_path, paths={"data_root": "/other"}), run) is None
    assert "paths.data_root: /data -> /other" in caplog.text


def test_results_without_a_digest_are_recomputed(tmp_path, caplog):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text("[{}]")
    with caplog.at_level(logging.WARNING, logger="speechbias"):
        assert finished_results(_cfg(tmp_path), run) is None
    assert "no run digest" in caplog.text


def test_a_changed_manifest_file_changes_the_digest(tmp_path, caplog):
    manifest = tmp_path / "m.csv"
    manifest.write_text("clip_id,path,role\n")
    cfg = _cfg(tmp_path, bias_test={"manifest": str(manifest)})
    run = _finish(tmp_path, cfg)
    assert finished_results(cfg, run) is not None
    manifest.write_text("clip_id,path,role\na,b.wav,X\n")
    with caplog.at_level(logging.WARNING, logger="speechbias"):
        assert finished_results(cfg, run) is None
    assert "bias_test.manifest.sha256" in caplog.text


def test_local_model_weights_are_part_of_the_digest(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"1234")
    cfg = _cfg(tmp_path, upstream={"model_id": str(model)})
    run = _finish(tmp_path, cfg)
    weights = json.loads((run / RUN_DIGEST_FILE).read_text())["extra"]["upstream.weights"]
    assert weights.startswith('[["model.safetensors", 4')
    (model / "model.safetensors").write_bytes(b"123456")
    assert finished_results(cfg, run) is None


def test_force_and_the_report_task_never_skip(tmp_path):
    run = _finish(tmp_path, _cfg(tmp_path))
    assert finished_results(_cfg(tmp_path, force=True), run) is None
    assert finished_results(_cfg(tmp_path, task={"name": "report"}), run) is None


def _hf_cache(root, model_id: str, commit: str):
    """The Hugging Face cache layout, by hand: refs/main names the snapshot folder of the commit."""
    repo = root / f"models--{model_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")


def test_a_new_hub_commit_of_the_model_changes_the_digest(tmp_path, caplog):
    hub = tmp_path / "hub"
    _hf_cache(hub, "org/model", "a" * 40)
    cfg = _cfg(tmp_path, upstream={"model_id": "org/model", "revision": "main", "cache_dir": str(hub)})
    run = _finish(tmp_path, cfg)
    assert json.loads((run / RUN_DIGEST_FILE).read_text())["extra"]["upstream.commit"] == json.dumps("a" * 40)
    assert finished_results(cfg, run) is not None
    _hf_cache(hub, "org/model", "b" * 40)  # `hf download org/model` fetched a new commit of main
    with caplog.at_level(logging.WARNING, logger="speechbias"):
        assert finished_results(cfg, run) is None
    assert f"upstream.commit: {'a' * 40} -> {'b' * 40}" in caplog.text


def _job(overrides):
    """evaluate.py's config for ``overrides`` with its hydra node (as a sweep's job gets it)."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        return compose("evaluate", overrides=overrides, return_hydra_config=True)


def test_one_list_decides_folder_names_and_the_digest(tmp_path):
    """A result-neutral override changes neither the job's folder name nor its digest; a result key both."""
    from speechbias.result_neutral_keys import RESULT_NEUTRAL_KEYS
    from speechbias.tasks.run_markers import identity_digest, run_identity

    def folder_and_digest(overrides):
        cfg = _job(overrides)
        job = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        return cfg.hydra.job.override_dirname, identity_digest(run_identity(job))

    base = folder_and_digest(["seed=1"])
    for neutral in ("force=true", "extraction.batch_size=3", "extraction.num_workers=1", "logger.mode=disabled"):
        assert neutral.split("=")[0].split(".")[0] in {k.split(".")[0] for k in RESULT_NEUTRAL_KEYS}
        assert folder_and_digest(["seed=1", neutral]) == base, neutral
    name, digest = folder_and_digest(["seed=2"])
    assert name == "seed=2" and base[0] == "seed=1" and digest != base[1]


def test_results_of_another_statistics_layout_are_recomputed(tmp_path, monkeypatch, caplog):
    """The layout decides how a sampled p is drawn (layout 2: each subset with its complement): a folder
    finished under another layout is not reused."""
    from speechbias.stats import permutation

    cfg = _cfg(tmp_path)
    run = _finish(tmp_path, cfg)
    assert finished_results(cfg, run) is not None
    monkeypatch.setattr(permutation, "STATISTICS_LAYOUT", permutation.STATISTICS_LAYOUT - 1)
    with caplog.at_level(logging.WARNING, logger="speechbias"):
        assert finished_results(cfg, run) is None
    assert "statistics_layout" in caplog.text


def test_a_changed_clip_is_named_and_a_digest_without_clips_says_it_is_an_earlier_versions():
    from speechbias.tasks.run_markers import describe_change

    values = {"values": {"seed": "0"}, "extra": {}}
    now = {**values, "clips": {"/c/x.wav": "ab" * 32, "/c/y.wav": "ef" * 32}}
    then = {**values, "clips": {"/c/x.wav": "cd" * 32, "/c/y.wav": "ef" * 32}}
    assert describe_change(then, now) == "clip /c/x.wav changed (audio sha256 cdcdcdcdcdcd -> abababababab)"
    assert describe_change(values, now) == "clips not recorded (a digest of an earlier version)"
    assert describe_change({**now, "clips": {"/c/x.wav": "ab" * 32}}, now) == "clip /c/y.wav added"
