"""Config checks that run before torch is imported: learning rates, required values, task arguments, manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from speechbias.launch.config_checks import check_config
from speechbias.tasks.report_checks import check_report_arguments
from speechbias.ser.training_settings import learning_rates
from speechbias.errors import ConfigError


@pytest.mark.parametrize(
    "value, expected",
    [
        (1e-4, [1e-4]),
        ("1e-3", [1e-3]),
        (2, [2.0]),
        ([1e-3, 1e-4, 1e-5], [1e-3, 1e-4, 1e-5]),
        (OmegaConf.create([0.1, "0.01"]), [0.1, 0.01]),
    ],
)
def test_learning_rates_accept_positive_numbers(value, expected):
    assert learning_rates(value) == pytest.approx(expected)


@pytest.mark.parametrize("value", ["abc", 0, -1e-4, [], [1e-3, "x"], True, float("nan"), float("inf"), None])
def test_learning_rates_reject_anything_else_in_one_line(value):
    with pytest.raises(ConfigError) as info:
        learning_rates(value)
    assert str(info.value).startswith("lr=") and "\n" not in str(info.value)


def test_a_required_value_left_unset_is_named_with_an_example():
    cfg = OmegaConf.create(
        {
            "task": {"name": "report"},
            "sweep_dir": "???",
            "hydra": {"x": "???"},
            "corpus": {"load": {"manifest": "???"}},
            "ref": "${sweep_dir}",
        }
    )
    with pytest.raises(ConfigError, match=r"^corpus.load.manifest: required.*corpus.load.manifest=<csv>"):
        check_config(cfg)
    cfg.corpus.load.manifest = "/m.csv"
    with pytest.raises(ConfigError, match=r"^sweep_dir: required.*task=report sweep_dir=multirun/"):
        check_config(cfg)


def test_report_arguments_must_be_existing_folders_and_files(tmp_path):
    cfg = OmegaConf.create(
        {"sweep_dir": str(tmp_path / "nope"), "paper_results": None, "task": {"extra_sweep_dirs": []}}
    )
    with pytest.raises(ConfigError, match="nope: no such folder"):
        check_report_arguments(cfg)
    cfg.sweep_dir = str(tmp_path)
    with pytest.raises(ConfigError, match="no job folders"):  # a folder, but nothing to report
        check_report_arguments(cfg)
    (tmp_path / "upstream=fbank" / ".hydra").mkdir(parents=True)
    check_report_arguments(cfg)
    cfg.paper_results = str(tmp_path / "paper.csv")
    with pytest.raises(ConfigError, match="paper_results=.*paper.csv: no such file"):
        check_report_arguments(cfg)


def _manifest(tmp_path, paths):
    (tmp_path / "here.wav").write_bytes(b"RIFF")
    lines = ["clip_id,path,role"] + [f"c{i},{p},X" for i, p in enumerate(paths)]
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_speat_task_checks_its_bias_test_manifest(tmp_path):
    path = _manifest(tmp_path, ["here.wav", "gone.wav"])
    cfg = OmegaConf.create({"task": {"name": "speat"}, "bias_test": {"manifest": str(path), "root": None}})
    with pytest.raises(ConfigError, match="1 audio file"):
        check_config(cfg)
    cfg.bias_test.manifest = str(tmp_path / "missing.csv")
    with pytest.raises(ConfigError, match="missing.csv: no such file and no builder"):
        check_config(cfg)
    cfg.bias_test.builder = {"_target_": "x.y"}  # a builder writes the manifest on first use
    check_config(cfg)


def test_a_relative_sweep_dir_is_found_in_the_cwd_first_then_in_the_project(tmp_path, monkeypatch):
    from speechbias.project_paths import user_path

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "multirun" / "s" / "job" / ".hydra").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = OmegaConf.create(
        {
            "sweep_dir": "multirun/s",
            "paper_results": None,
            "paths": {"root_dir": str(project)},
            "task": {"extra_sweep_dirs": []},
        }
    )
    check_report_arguments(cfg)  # only the project has it
    assert user_path("multirun/s", project) == project / "multirun" / "s"
    (elsewhere / "multirun" / "s").mkdir(parents=True)  # the cwd's wins when both have it
    assert user_path("multirun/s", project) == elsewhere / "multirun" / "s"
    assert user_path("/abs/x", project) == Path("/abs/x")
    cfg.sweep_dir = "multirun/none"
    with pytest.raises(ConfigError, match="multirun/none: no such folder"):
        check_report_arguments(cfg)


def test_unknown_group_options_name_close_matches_and_plain_values_pass(conf_dir):
    from speechbias.launch.config_checks import check_group_options

    check_group_options(
        [
            "upstream=hubert_base",
            "lr=1e-4",
            "bias_test.manifest=/x.csv",
            "upstream=glob(*)",
            "bias_test=demo_voice,demo_accent",
            "~sllm",
            "hydra/launcher=parallel",
        ],
        conf_dir,
    )
    with pytest.raises(
        ConfigError,
        match=r"^upstream=wavlm_larg: no such option of config group upstream; "
        r"did you mean wavlm_large",
    ):
        check_group_options(["upstream=wavlm_larg"], conf_dir)
    with pytest.raises(ConfigError, match="hydra/launcher=slurmm: .*did you mean slurm"):
        check_group_options(["-m", "hydra/launcher=slurmm"][1:], conf_dir)


def test_options_found_without_hydras_loader_are_options_hydras_loader_finds(conf_dir):
    """surely_an_option, which spares a command Hydra's loader (~0.13 CPU-s of a list job), against the loader
    itself: every option it finds (each YAML file of each group, the ConfigStore's aggregations) the loader
    lists; a misspelt name and a path are left to the loader."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import speechbias.launch.entry  # noqa: F401 - registers the aggregation options, as the entry points do
    from speechbias.launch.config_checks import surely_an_option

    groups = sorted(p.name for p in Path(conf_dir).iterdir() if p.is_dir() and p.name != "hydra")
    with initialize_config_dir(config_dir=str(Path(conf_dir).resolve()), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for group in [*groups, "aggregation"]:
            listed = loader.get_group_options(group)
            candidates = {p.stem for p in (Path(conf_dir) / group).glob("*.yaml")} | set(listed)
            found = {name for name in candidates if surely_an_option(conf_dir, group, name)}
            assert found and found <= set(listed), group
        # the keys taken for values without it (each entry's top-level keys, its _global_ options' too): no group
        from speechbias.launch.command_line_keys import top_keys
        from speechbias.launch.config_checks import surely_a_value

        for entry in ("evaluate", "train"):
            keys = set(top_keys(str(Path(conf_dir).resolve()), entry)[0])
            values = {k for k in keys if surely_a_value(conf_dir, entry, k)}
            assert {"sweep_dir", "seed"} <= values if entry == "evaluate" else "seed" in values
            assert not values & set(loader.list_groups("")), entry
    assert surely_an_option(conf_dir, "aggregation", "mean_sum") and surely_an_option(conf_dir, "upstream", "fbank")
    for name in ("fbnk", "../upstream/fbank", "fbank/../fbank", ""):
        assert not surely_an_option(conf_dir, "upstream", name)
    assert not surely_a_value(conf_dir, None, "sweep_dir") and not surely_a_value(conf_dir, "evaluate", "upstream")


def test_a_list_job_of_known_options_is_checked_without_hydras_loader(conf_dir, monkeypatch):
    import hydra

    from speechbias.launch.config_checks import check_group_options

    def no_loader(*args, **kwargs):
        raise AssertionError("Hydra's loader set up")

    monkeypatch.setattr(hydra, "initialize_config_dir", no_loader)
    check_group_options(
        ["bias_test=[demo_voice,demo_accent]", "aggregation=[mean_sum,max_q3]", "upstream=fbank"], conf_dir
    )
    with pytest.raises(ConfigError, match=r"^upstream=\[fbank,mfcc\]: a run takes one upstream"):
        check_group_options(["upstream=[fbank,mfcc]"], conf_dir)
    with pytest.raises(AssertionError, match="loader set up"):  # a name it does not know: the loader decides
        check_group_options(["upstream=fbnk"], conf_dir)
    check_group_options(["task=report", "sweep_dir=multirun/x", "seed=3", "logger=none"], conf_dir, "evaluate")
    with pytest.raises(AssertionError, match="loader set up"):  # without the entry config: the loader decides
        check_group_options(["task=report", "sweep_dir=multirun/x"], conf_dir)


def test_command_line_overrides_drop_hydra_flags():
    from speechbias.launch.config_checks import command_line_overrides

    assert command_line_overrides(["-m", "a=1", "--cfg", "job", "~sllm", "+selection=paper"]) == [
        "a=1",
        "~sllm",
        "+selection=paper",
    ]


def _roles_manifest(tmp_path, counts):
    lines = ["clip_id,path,role"] + [f"{r}{i},c.wav,{r}" for r, n in counts.items() for i in range(n)]
    path = tmp_path / "roles.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_each_role_needs_two_clips(tmp_path):
    from speechbias.stimuli.manifest import read_manifest_rows
    from speechbias.tasks.input_checks import check_role_sizes

    def check(path):
        check_role_sizes(read_manifest_rows(path, required_roles=(), check_files=False), path)

    check(_roles_manifest(tmp_path, {"X": 2, "Y": 2, "A": 3, "B": 2}))
    with pytest.raises(ConfigError, match=r"roles.csv: too few clips per role \(Y: 1, B: 0\)"):
        check(_roles_manifest(tmp_path, {"X": 2, "Y": 1, "A": 3}))


def test_spoken_stereoset_needs_the_metadata_of_each_domain(tmp_path):
    from speechbias.tasks.spoken_stereoset_checks import check_spoken_stereoset_data

    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "gender_v1.0.csv").write_text("x\n")
    cfg = OmegaConf.create({"task": {"data_dir": str(tmp_path), "version": "v1.0", "domains": ["gender", "age"]}})
    with pytest.raises(ConfigError, match=r"metadata/age_v1.0.csv not found"):
        check_spoken_stereoset_data(cfg)
    cfg.task.domains = ["gender"]
    check_spoken_stereoset_data(cfg)


def test_corpus_folders_honour_corpus_dirs_overrides(tmp_path):
    from speechbias.tasks.input_checks import check_corpus_folders

    (tmp_path / "saa").mkdir()
    node = OmegaConf.create(
        {
            "builder": {
                "test": "female_male",
                "data_root": str(tmp_path),
                "selection": "ours",
                "corpus_dirs": {"saa": "saa"},
            }
        }
    )
    with pytest.raises(ConfigError, match=r"corpus folder\(s\) not found: .*morgan_emotional_speech_set \(mess\); "):
        check_corpus_folders(node, "bias_test")
    node.builder.corpus_dirs = {"saa": "saa", "mess": str(tmp_path / "saa")}  # an absolute folder is taken as is
    check_corpus_folders(node, "bias_test")


def test_an_error_re_raised_by_a_dataloader_worker_keeps_its_own_line():
    from speechbias.errors import StorageError, error_message

    exc = StorageError(
        "Caught StorageError in DataLoader worker process 0.\nOriginal Traceback (most recent call "
        'last):\n  File "x.py", line 1, in f\n'
        "speechbias.errors.StorageError: /c/x: cannot write it"
    )
    assert error_message(exc) == "/c/x: cannot write it"


def test_a_config_the_hydra_callback_checked_is_not_checked_again_by_its_job_only(monkeypatch):
    """A single run's config is checked once (Hydra's on_run_start), not again by the job; a job with
    another config, or a second job with the same one, is checked."""
    from speechbias.launch import config_checks

    calls = []
    monkeypatch.setattr(config_checks, "check_config", lambda cfg: calls.append(cfg.seed))
    monkeypatch.setattr(config_checks, "check_writable_folder", lambda *a, **k: None)
    job = OmegaConf.create({"seed": 1, "lr": 0.1})
    config_checks.ConfigCheckCallback().on_run_start(OmegaConf.merge(job, {"hydra": {"run": {"dir": "x"}}}))
    config_checks.check_config_unless_checked(job)
    assert calls == [1]
    config_checks.check_config_unless_checked(job)  # taken once
    assert calls == [1, 1]
    config_checks.ConfigCheckCallback().on_run_start(OmegaConf.merge(job, {"hydra": {"run": {"dir": "x"}}}))
    config_checks.check_config_unless_checked(OmegaConf.create({"seed": 2, "lr": 0.1}))
    assert calls == [1, 1, 1, 2]


def test_every_task_brings_its_own_checks(conf_dir):
    """Each task of conf/task/ (and train.py's train_ser) has ``speechbias.tasks.<task>_checks.check_config``."""
    from speechbias.launch.config_checks import task_checks_module

    tasks = [p.stem for p in sorted((conf_dir / "task").glob("*.yaml"))] + ["train_ser"]
    assert len(tasks) >= 5
    for task in tasks:
        assert callable(task_checks_module(task).check_config), task
    assert task_checks_module("no_such_task") is None and task_checks_module("../x") is None


def test_a_csv_header_is_read_past_a_byte_order_mark_and_an_unreadable_file_is_one_line(tmp_path):
    from speechbias.tasks.input_checks import csv_header

    table = tmp_path / "utterances.tsv"
    table.write_bytes(b"\xef\xbb\xbfpath\ttranscript\na.wav\thi\n")  # a spreadsheet's "UTF-8" export
    assert csv_header(table, "corpus.load.manifest=u.tsv", "fix", sep="\t") == ["path", "transcript"]
    binary = tmp_path / "results.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81 not text")
    with pytest.raises(ConfigError) as caught:
        csv_header(binary, "propagation.speat_results=results.csv", "give a results.csv")
    assert (
        str(caught.value)
        == "propagation.speat_results=results.csv: cannot be read (UnicodeDecodeError); give a results.csv"
    )
