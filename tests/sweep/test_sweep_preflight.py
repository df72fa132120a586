"""A sweep's pre-flight (speechbias.launch.sweep_preflight): the command a user types, without model weights or
corpora, stops within seconds with one line per distinct cause and launches nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from speechbias.launch.sweep_preflight import GO_ON, jobs_per_point


def _sweep(repo: Path, tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp / "empty_hf_home"),
        WANDB_MODE="offline",
        SPEECHBIAS_CACHE=str(tmp / "cache"),
        PYTHONWARNINGS="ignore",
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(repo / "evaluate.py"), "-m", *args, f"hydra.sweep.dir={tmp / 'sweep'}"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, time.monotonic() - started


def test_a_sweep_over_models_without_weights_stops_before_any_job(repo_root, tmp_path):
    """The issue's command: 2 jobs each failed after ~18 s with 2 error lines per model (job line + table),
    37 console lines in all; now one line naming both models, with one command that downloads them all
    (hf download takes one repository per call), within seconds, and no job folder."""
    proc, seconds = _sweep(
        repo_root, tmp_path, "upstream=hubert_base,wavlm_base", "bias_test=demo_voice", "hydra/launcher=parallel"
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and len(lines) == 2, lines
    assert "2 model(s) cannot be loaded" in errors[0]
    assert "facebook/hubert-base-ls960, microsoft/wavlm-base" in errors[0]
    assert "for m in facebook/hubert-base-ls960 microsoft/wavlm-base; do hf download $m; done" in errors[0]
    assert lines[-1].startswith("sweep not launched: 1 problem(s)") and GO_ON in lines[-1]
    assert not (tmp_path / "sweep").exists()  # nothing launched: no sweep or job folder
    assert seconds < 30, seconds


def test_one_missing_data_folder_is_one_line_for_every_job_it_stops(repo_root, tmp_path):
    """4 sweep points (2 models x 2 aggregations) over one missing corpus: the corpus line once, then the models."""
    proc, _ = _sweep(
        repo_root,
        tmp_path,
        "upstream=hubert_base,wavlm_base",
        "aggregation=mean_sum,max_q3",
        "bias_test=female_male",
        f"paths.data_root={tmp_path / 'nonexistent'}",
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 2, proc.stderr
    assert errors[0].startswith(f"error: paths.data_root={tmp_path / 'nonexistent'}: no such folder")
    assert "2 model(s) cannot be loaded" in errors[1]  # weights and data in one pass
    assert not (tmp_path / "sweep").exists()


def test_one_missing_data_root_for_several_tests_is_one_line_naming_them(repo_root, tmp_path):
    """experiment=paper_speat's six tests over one missing data root printed its line six times."""
    proc, _ = _sweep(
        repo_root,
        tmp_path,
        "upstream=fbank",
        "bias_test=female_male,young_old,us_foreign",
        f"paths.data_root={tmp_path / 'nonexistent'}",
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"error: paths.data_root={tmp_path / 'nonexistent'}: no such folder; needed by ")
    for test in ("female_male", "young_old", "us_foreign"):
        assert f"bias_test={test}" in errors[0]


def test_each_test_of_a_job_s_list_is_checked(repo_root, tmp_path):
    """A job given a list of tests (``bias_test=[a,b]``, one job of several pairs) checks each of them."""
    proc, _ = _sweep(
        repo_root,
        tmp_path,
        "upstream=fbank",
        "bias_test=[demo_voice,female_male]",
        f"paths.data_root={tmp_path / 'nonexistent'}",
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"error: paths.data_root={tmp_path / 'nonexistent'}: no such folder")
    assert "bias_test=female_male builds its stimuli" in errors[0]
    assert not (tmp_path / "sweep").exists()


def test_a_sweep_whose_inputs_are_there_is_launched(repo_root, tmp_path):
    proc, _ = _sweep(
        repo_root,
        tmp_path,
        "upstream=fbank",
        "bias_test=demo_voice",
        "logger=none",
        "speat.n_permutations=100",
        "speat.per_layer=false",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "sweep not launched" not in proc.stderr and (tmp_path / "sweep" / "sweep_status.csv").is_file()


def test_the_points_are_composed_once_per_distinct_input(conf_dir):
    """Aggregations and statistics settings name no input: 2 models x 3 aggregations x 2 seeds = 2 points."""
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("evaluate", return_hydra_config=True)
        with open_dict(cfg):  # the command line of `python evaluate.py -m ...`
            cfg.hydra.overrides.task = [
                "upstream=fbank,mfcc",
                "aggregation=mean_sum,max_q3,min_last",
                "seed=0,1",
                "bias_test=demo_voice",
            ]
        points = jobs_per_point(cfg)
    assert points == {("upstream=fbank", "bias_test=demo_voice"): 6, ("upstream=mfcc", "bias_test=demo_voice"): 6}
    assert list(points) == [("upstream=fbank", "bias_test=demo_voice"), ("upstream=mfcc", "bias_test=demo_voice")]


def test_a_random_control_is_asked_for_its_config_only(conf_dir):
    """upstream.randomize=true reads the model's config only: the pre-flight asks it for config.json and
    preprocessor_config.json, not the weights, while the same upstream with its pretrained weights is asked
    for them; an inline random model names no files at all."""
    from speechbias.launch.model_files_check import needed_models

    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        inline = compose("evaluate", overrides=["upstream=random_wav2vec2_base"])
        random_control = compose("evaluate", overrides=["upstream=wav2vec2_base", "upstream.randomize=true"])
        pretrained = compose("evaluate", overrides=["upstream=wav2vec2_base"])
    assert inline.upstream.randomize is True and needed_models(inline) == []
    assert [(m.model_id, m.only_files) for m in needed_models(random_control)] == [
        ("facebook/wav2vec2-base", ("config.json", "preprocessor_config.json"))
    ]
    assert [(m.model_id, m.only_files) for m in needed_models(pretrained)] == [("facebook/wav2vec2-base", ())]
