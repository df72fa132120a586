"""Launcher, experiment and report configs compose, name existing configs, and map onto sbatch."""

from __future__ import annotations

import os
import stat

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob
from omegaconf import OmegaConf

PAPER_UPSTREAMS = {
    "wav2vec2_base",
    "wav2vec2_large",
    "wav2vec2_large_lv60",
    "hubert_base",
    "hubert_large",
    "hubert_xl",
    "wavlm_base",
    "wavlm_base_plus",
    "wavlm_large",
    "whisper_base",
    "whisper_base_en",
    "whisper_small",
    "whisper_small_en",
    "whisper_medium",
    "whisper_medium_en",
    "whisper_large",
}
US_TESTS = {
    "abled_disabled",
    "european_african_american",
    "female_male",
    "human_synthesized",
    "us_foreign",
    "young_old",
}


def _compose(conf_dir, overrides, config="evaluate"):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(config, overrides=[*overrides, "paths.root_dir=/project"], return_hydra_config=True)


def _options(conf_dir, group: str) -> list[str]:
    """The options of a config group as Hydra's sweeper globs them: conf/<group>/*.yaml and ConfigStore
    nodes (group aggregation lives in the ConfigStore, speechbias.launch.aggregation_configs)."""
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


def _sweep_values(conf_dir, params: dict) -> dict[str, list[str]]:
    """Each sweeper parameter expanded to its values (globs against the config group's files)."""
    parser = OverridesParser.create()
    out = {}
    for key, value in params.items():
        override = parser.parse_overrides([f"{key}={value}"])[0]
        if override.is_sweep_override():
            v = override.value()
            out[key] = v.filter(_options(conf_dir, key)) if isinstance(v, Glob) else [str(x) for x in v.list]
        else:  # one value; a list ("[a,b]") is one job's list (a SpEAT job of several pairs)
            v = override.value()
            out[key] = [str(x) for x in v] if isinstance(v, list) else [str(v)]
    return out


def _n_jobs(params: dict) -> int:
    """The jobs of a sweep: the product of its sweeps' lengths (a list is one value)."""
    parser = OverridesParser.create()
    n = 1
    for key, value in params.items():
        override = parser.parse_overrides([f"{key}={value}"])[0]
        if override.is_sweep_override():
            n *= len(override.value().list)
    return n


@pytest.mark.parametrize(
    "name, tests, n_aggregations",
    [
        ("paper_speat", US_TESTS, 1),
        ("paper_se_curves", US_TESTS, 1),
        ("paper_aggregation", US_TESTS, 30),
        ("paper_uk", {"uk_young_old", "uk_british_foreign"}, 1),
        (
            "paper_alternates",
            {
                "abled_disabled_uaspeech",
                "female_male_mitchell",
                "human_synthesized_mitchell",
                "us_foreign_pantos_perkins",
            },
            1,
        ),
    ],
)
def test_paper_experiments_sweep_the_16_models_over_their_tests(conf_dir, name, tests, n_aggregations):
    cfg = _compose(conf_dir, [f"experiment={name}"])
    values = _sweep_values(conf_dir, cfg.hydra.sweeper.params)
    assert set(values["upstream"]) == PAPER_UPSTREAMS
    assert set(values["bias_test"]) == tests and tests <= set(_options(conf_dir, "bias_test"))
    aggregations = values.get("aggregation", [cfg.hydra.runtime.choices.aggregation])
    assert len(aggregations) == n_aggregations and set(aggregations) <= set(_options(conf_dir, "aggregation"))
    if name in ("paper_speat", "paper_aggregation"):  # one job per model: its tests (and aggregations) as lists
        assert _n_jobs(cfg.hydra.sweeper.params) == 16
    if n_aggregations == 30:
        assert not any(a.endswith("_sum") for a in aggregations)
    else:
        assert aggregations == ["mean_sum"]
    # a fixed sweep folder per experiment: the same command resumes the sweep
    assert cfg.hydra.sweep.dir == f"/project/multirun/{name}", (
        "conf/evaluate.yaml must list `experiment: null` after `_self_` so that experiments override its values"
    )


def test_experiment_settings_override_the_entry_config(conf_dir):
    se = _compose(conf_dir, ["experiment=paper_se_curves"]).speat
    assert se.se_curve is True and se.n_permutations == 1_000_000 and se.n_resamples == 10_000, (
        "conf/evaluate.yaml must list `experiment: null` after `_self_` so that experiments override its values"
    )
    assert _compose(conf_dir, ["experiment=paper_aggregation"]).speat.n_permutations == 10_000
    demo = _compose(conf_dir, ["experiment=demo"])
    assert set(_sweep_values(conf_dir, demo.hydra.sweeper.params)["bias_test"]) == {"demo_voice", "demo_accent"}


def test_propagation_experiment_trains_three_heads_per_model(conf_dir):
    if not (conf_dir / "train.yaml").is_file():
        pytest.skip("conf/train.yaml not present")
    cfg = _compose(conf_dir, ["experiment=paper_propagation"], config="train")
    values = _sweep_values(conf_dir, cfg.hydra.sweeper.params)
    assert set(values["upstream"]) == PAPER_UPSTREAMS and sorted(map(float, values["lr"])) == [1e-5, 1e-4, 1e-3]
    assert cfg.hydra.runtime.choices.ser_data == "mess"
    assert set(cfg.bias_tests) == US_TESTS and cfg.max_steps == 20000, (
        "conf/train.yaml must list `experiment: null` after `_self_` so that experiments override its values"
    )


def test_job_folders_are_named_by_what_changes_results(conf_dir):
    cfg = _compose(conf_dir, [])
    assert OmegaConf.to_container(cfg.hydra.sweep)["subdir"] == "${hydra.job.override_dirname}"
    excluded = set(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert {"force", "logger", "paths.cache_dir", "trainer", "experiment"} <= excluded
    assert not {"upstream", "bias_test", "aggregation", "seed", "speat.n_permutations"} & excluded


def test_report_task_writes_into_the_sweep_folder(conf_dir):
    cfg = _compose(conf_dir, ["task=report", "sweep_dir=/runs/multirun/x"])
    assert cfg.task.run_dir == "/runs/multirun/x/report"
    assert cfg.task.run._target_ == "speechbias.tasks.report.ReportTask"
    assert cfg.paper_results is None and cfg.task.main_aggregation == "mean_sum"
    # every paper model maps to the hub id of one of our upstream configs
    ids = {OmegaConf.load(conf_dir / "upstream" / f"{u}.yaml").model_id for u in PAPER_UPSTREAMS}
    assert set(cfg.task.paper_models.values()) == ids
    assert set(cfg.task.paper_tests.values()) <= set(_options(conf_dir, "bias_test"))


def test_parallel_launcher_extends_joblib(conf_dir):
    cfg = _compose(conf_dir, ["hydra/launcher=parallel", "hydra.launcher.n_jobs=3"])
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher") and cfg.hydra.launcher.n_jobs == 3


def test_slurm_launcher_renders_an_sbatch_script(conf_dir, tmp_path, monkeypatch):
    """The plugin's own launch() (called by ours after its checks) builds speechbias's submitit
    executor with the launcher's settings; the job array is intercepted before sbatch runs."""
    submitit = pytest.importorskip("submitit")
    from hydra_plugins.speechbias_launcher.slurm_launcher import SpeechbiasSlurmLauncher
    from speechbias.launch.slurm import resources

    cfg = _compose(
        conf_dir,
        [
            "hydra/launcher=slurm",
            "hydra.launcher.partition=gpu-a100",
            "hydra.launcher.timeout_min=90",
            "hydra.launcher.mem_gb=48",
            "hydra.launcher.tasks_per_node=2",
            "trainer=ddp",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
    )
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    assert launcher["_target_"].endswith("SlurmLauncher")
    # submitit checks for srun on PATH, the launcher for sbatch; stand-ins let the script render off a cluster
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("srun", "sbatch"):
        (fake / tool).write_text("#!/bin/sh\n")
        (fake / tool).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_ACCOUNT", raising=False)
    monkeypatch.setattr(resources, "cluster_partitions", lambda: None)  # no sinfo answer: nothing to check
    submitted = []
    monkeypatch.setattr(submitit.AutoExecutor, "map_array", lambda ex, fn, *args: submitted.append((ex, fn)) or [])
    params = {k: OmegaConf.select(cfg.hydra.launcher, k) for k in launcher if k not in ("_target_", "name")}
    params.update(name="evaluate", submitit_folder=str(tmp_path / "sub"))
    runner = SpeechbiasSlurmLauncher(**params)
    runner.setup(hydra_context=None, task_function=None, config=cfg)
    assert runner.launch([["upstream=fbank"]], initial_job_idx=0) == []
    ((executor, fn),) = submitted
    assert fn is runner and executor.cluster == "speechbiasslurm"  # our executor, by its plug-in name
    text = executor._executor._make_submission_file_text("python evaluate.py", "uid")
    for line in (
        "#SBATCH --partition=gpu-a100",
        "#SBATCH --time=90",
        "#SBATCH --mem=48GB",
        "#SBATCH --ntasks-per-node=2",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --gpus-per-node=2",  # GPUs follow the tasks: one per DDP rank
        "--kill-on-bad-exit=1",
    ):  # a failed rank ends the job
        assert line in text, line
    assert "pending_report_s" not in text and "poll_s" not in text  # the launcher's own settings
