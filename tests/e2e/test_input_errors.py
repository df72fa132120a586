"""Bad input typed as a user types it: one line (``error: ... (HYDRA_FULL_ERROR=1 shows the traceback)``),
exit 1, within seconds and before any model loads.

Each command runs ``evaluate.py`` in a subprocess from a fresh folder. The read-only and full-disk cases
need real file systems of that kind: they mount one in a user namespace (``unshare``) and skip where the
machine does not allow it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo"
FAST = ("speat.n_permutations=1000", "speat.per_layer=false", "logger=none")


def _run(tmp_path: Path, *args: str, prefix: tuple[str, ...] = (), timeout: int = 300) -> tuple[int, list[str]]:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    # no model in the Hugging Face cache: a pretrained model's files are missing wherever the tests run
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", HF_HOME=str(tmp_path / "empty_hf_home"))
    env.pop("HYDRA_FULL_ERROR", None)
    command = [*prefix, sys.executable, str(REPO / "evaluate.py"), f"paths.output_root={tmp_path / 'outputs'}", *args]
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [
        ln
        for ln in (proc.stdout + proc.stderr).splitlines()
        if ln.strip() and "srun" not in ln and "Predicting" not in ln
    ]  # Lightning's (issue 21) and the bar
    return proc.returncode, lines


def _one_error(tmp_path: Path, *args: str, **kw) -> str:
    rc, lines = _run(tmp_path, *args, **kw)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and lines[0].endswith("(HYDRA_FULL_ERROR=1 shows the traceback)")
    return lines[0]


N_UPSTREAMS = len(list((REPO / "conf" / "upstream").glob("*.yaml")))


@pytest.mark.parametrize(
    "option, expected",
    [
        (
            "upstream=nonexistent",
            f"upstream=nonexistent: no such option of config group upstream; {N_UPSTREAMS} options",
        ),
        ("bias_test=femal_male", "did you mean female_male"),
        ("aggregation=foo_bar", "aggregation=foo_bar: no such option of config group aggregation; 33 options"),
        ("aggregation=mean_summ", "did you mean mean_sum"),
    ],
)
def test_an_unknown_option_is_one_line_naming_close_matches(tmp_path, option, expected):
    assert expected in _one_error(tmp_path, option)


def test_an_unknown_option_inside_a_sweep_is_named_before_any_job(tmp_path):
    line = _one_error(tmp_path, "-m", "bias_test=demo_voice,demo_acent")
    assert "bias_test=demo_acent" in line and "did you mean demo_accent" in line
    assert not (tmp_path / "cwd" / "multirun").exists()


def test_missing_corpora_are_named_before_the_model_is_loaded_with_its_missing_weights(tmp_path):
    line = _one_error(
        tmp_path,
        "paths.data_root=/nonexistent",
        "bias_test=female_male",
        "upstream=hubert_base",
        f"paths.cache_dir={tmp_path / 'cache'}",
    )
    assert line.startswith("error: paths.data_root=/nonexistent: no such folder; bias_test=female_male")
    data, _, model = line.partition("; also: ")
    assert "speech_accent_archive" in data and "hubert" not in data
    assert model.startswith("cannot load the config and weights of model 'facebook/hubert-base-ls960'")


def test_a_missing_corpus_folder_under_an_existing_data_root_is_named(tmp_path):
    (tmp_path / "data" / "speech_accent_archive").mkdir(parents=True)
    line = _one_error(
        tmp_path,
        f"paths.data_root={tmp_path / 'data'}",
        "bias_test=female_male",
        "upstream=hubert_base",
        f"paths.cache_dir={tmp_path / 'cache'}",
    )
    assert f"{tmp_path / 'data' / 'morgan_emotional_speech_set'} (mess)" in line
    assert "speech_accent_archive (saa)" not in line


def test_a_missing_spoken_stereoset_folder_is_named_before_the_model_is_loaded_with_its_missing_weights(tmp_path):
    line = _one_error(tmp_path, "task=spoken_stereoset", "sllm=qwen2_audio", "task.data_dir=/nonexistent/sss")
    data, _, model = line.partition("; also: ")
    assert "task.data_dir=/nonexistent/sss: no such folder" in data and "Qwen" not in data
    assert model.startswith("cannot load the config and weights of model 'Qwen/Qwen2-Audio-7B-Instruct'")


def _manifest(tmp_path: Path, rows: pd.DataFrame, name: str) -> Path:
    path = tmp_path / name
    rows.to_csv(path, index=False)
    return path


def _demo_rows() -> pd.DataFrame:
    df = pd.read_csv(DEMO / "demo_voice.csv", dtype=str, keep_default_na=False)
    df["path"] = [str(DEMO / p) for p in df["path"]]
    return df


def test_one_clip_per_role_is_named_before_any_extraction(tmp_path):
    path = _manifest(tmp_path, _demo_rows().groupby("role").head(1), "one_each.csv")
    line = _one_error(tmp_path, f"bias_test.manifest={path}", *FAST)
    assert f"bias_test.manifest={path}: too few clips per role (X: 1, Y: 1, A: 1, B: 1)" in line


def test_every_bad_clip_is_listed_in_one_error(tmp_path):
    rows = _demo_rows()
    bad = tmp_path / "bad"
    bad.mkdir()
    sf.write(bad / "nan.wav", np.full(16000, np.nan, dtype=np.float32), 16000, subtype="FLOAT")
    whole = (DEMO / rows.loc[1, "path"]).read_bytes()
    (bad / "cut.flac").write_bytes(whole[: len(whole) // 2])
    (bad / "empty.flac").write_bytes(b"")
    for i, name in zip((0, 1, 25), ("nan.wav", "cut.flac", "empty.flac")):
        rows.loc[i, "path"] = str(bad / name)
    line = _one_error(tmp_path, f"bias_test.manifest={_manifest(tmp_path, rows, 'bad.csv')}", *FAST)
    assert "3 of 40 clips cannot be used" in line
    assert f"{bad / 'nan.wav'}: contains NaN" in line and f"{bad / 'cut.flac'}: looks truncated" in line
    assert f"{bad / 'empty.flac'}: " in line


def test_a_cache_folder_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "a_file").write_text("x")
    line = _one_error(tmp_path, f"paths.cache_dir={tmp_path / 'a_file' / 'cache'}", *FAST)
    cache = tmp_path / "a_file" / "cache"  # probed, not made: its nearest existing parent is a file
    assert f"paths.cache_dir={cache}: cannot write there (in {tmp_path / 'a_file'}) (Not a directory)" in line


def test_an_output_folder_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "a_file").write_text("x")
    rc, lines = _run(tmp_path, f"hydra.run.dir={tmp_path / 'a_file' / 'run'}", *FAST)
    assert rc == 1 and len(lines) == 1, lines
    assert f"hydra.run.dir={tmp_path / 'a_file' / 'run'}: cannot write there (in {tmp_path / 'a_file'})" in lines[0]


def _namespace_mount(script: str) -> tuple[str, ...] | None:
    """``unshare`` command prefix that runs ``script`` (mounts) as root of a new user + mount namespace, then the
    command; None where the machine does not allow it."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
        capture_output=True,
    )
    if probe.returncode != 0:
        return None
    return ("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", f'{script} && exec "$@"', "sh")


def test_a_read_only_cache_folder_is_one_line_before_the_model_loads(tmp_path):
    cache = tmp_path / "ro_cache"
    cache.mkdir()
    prefix = _namespace_mount(f"mount --bind {cache} {cache} && mount -o remount,bind,ro {cache}")
    if prefix is None:
        pytest.skip("no user namespaces with mounts here")
    line = _one_error(tmp_path, f"paths.cache_dir={cache}", *FAST, prefix=prefix)
    assert f"paths.cache_dir={cache}: cannot write there (Read-only file system)" in line


@pytest.mark.slow
def test_a_full_disk_while_caching_is_one_line_naming_the_file(tmp_path):
    cache = tmp_path / "small_cache"
    cache.mkdir()
    prefix = _namespace_mount(f"mount -t tmpfs -o size=48k tmpfs {cache}")
    if prefix is None:
        pytest.skip("no user namespaces with mounts here")
    line = _one_error(tmp_path, f"paths.cache_dir={cache}", f"hydra.run.dir={tmp_path / 'run'}", *FAST, prefix=prefix)
    assert line.startswith(f"error: {cache}/") and "cannot write it (No space left on device)" in line
    assert "paths.cache_dir" in line


def test_train_names_a_missing_valence_corpus_before_the_model_is_loaded(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "train.py"),
            "upstream=hubert_xl",
            "ser_data=mess",
            "paths.data_root=/nonexistent",
            f"paths.output_root={tmp_path / 'outputs'}",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ser_data.source.root=/nonexistent/morgan_emotional_speech_set: no such folder")


def test_train_names_a_bad_step_kernel_before_anything_runs(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "train.py"),
            "downstream.step_kernel=fast",
            f"paths.output_root={tmp_path / 'outputs'}",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: downstream.step_kernel=fast: must be one of auto, compiled, torch")


def test_a_manifest_without_columns_names_all_of_them(tmp_path):
    rows = _demo_rows()[["path", "group"]]
    path = _manifest(tmp_path, rows, "no_role.csv")
    line = _one_error(tmp_path, f"bias_test.manifest={path}", *FAST)
    assert f"bias_test.manifest={path}: missing column(s) clip_id, role;" in line
    assert "its columns: path, group" in line


def test_lower_case_roles_are_named_with_the_accepted_spellings(tmp_path):
    rows = _demo_rows()
    rows["role"] = rows["role"].str.lower()
    line = _one_error(tmp_path, f"bias_test.manifest={_manifest(tmp_path, rows, 'lower.csv')}", *FAST)
    assert "role must be one of X, Y, A, B" in line and "in row(s) 2, 3, 4" in line
    assert "roles are case-sensitive: write A, B, X, Y for 'a', 'b', 'x', 'y'" in line


def test_relative_paths_not_found_name_the_manifest_folder(tmp_path):
    rows = pd.read_csv(DEMO / "demo_voice.csv", dtype=str, keep_default_na=False)  # paths relative to DEMO
    (tmp_path / "lists").mkdir()
    path = _manifest(tmp_path / "lists", rows, "relative.csv")
    line = _one_error(tmp_path, f"bias_test.manifest={path}", *FAST)
    assert "40 audio file(s) not found, e.g. audio/demo_voice/female_00.flac" in line
    assert f"relative paths are resolved against the manifest's folder {tmp_path / 'lists'} " in line


def test_repeated_audio_is_refused_naming_the_rows_unless_allowed(tmp_path):
    rows = _demo_rows()
    copy = tmp_path / "copy.flac"
    shutil.copy(rows.loc[0, "path"], copy)  # the same audio under another name, in role X
    extra = rows.iloc[[0, 1]].copy()
    extra["clip_id"] = ["again_0", "again_1"]
    extra["path"] = [str(copy), rows.loc[1, "path"]]  # and a row listing a file a second time
    path = _manifest(tmp_path, pd.concat([rows, extra]), "repeats.csv")
    cache = f"paths.cache_dir={tmp_path / 'cache'}"
    line = _one_error(tmp_path, f"bias_test.manifest={path}", cache, *FAST)
    assert "2 row(s) repeat audio listed in another row" in line
    assert f"row(s) 2, 42 (X: {rows.loc[0, 'path']} and other files with the same audio)" in line
    assert f"row(s) 3, 43 (X: {rows.loc[1, 'path']})" in line
    assert "not independent" in line and "allow_duplicate_audio=true" in line
    rc, lines = _run(tmp_path, f"bias_test.manifest={path}", cache, "allow_duplicate_audio=true", *FAST)
    assert rc == 0 and sum("repeat audio" in ln and "run anyway" in ln for ln in lines) == 1, lines


def test_a_bad_check_audio_value_is_one_line(tmp_path):
    line = _one_error(tmp_path, "check_audio=sometimes", *FAST)
    assert "check_audio=sometimes: must be one of changed, full" in line


def test_a_stratified_se_curve_without_strata_is_named_before_any_extraction(tmp_path):
    # the demo manifest pairs its targets (pair_id s00..s19) but gives them no stratum
    line = _one_error(tmp_path, "bias_test.resampling=stratified", "speat.se_curve=true", *FAST)
    assert "bias_test.resampling=stratified resamples the SE curve by stratum, but 20 of 20 target clips" in line
    assert "(female_00; female_01; female_02; ... (17 more))" in line
    assert "or bias_test.resampling=iid, or speat.se_curve=false" in line
    assert not (tmp_path / "outputs").exists()  # refused before any run folder


def test_a_paired_se_curve_with_a_pair_id_on_two_x_clips_is_named(tmp_path):
    rows = _demo_rows()
    x = rows.index[rows["role"] == "X"]
    rows.loc[x[1], "pair_id"] = rows.loc[x[0], "pair_id"]  # s00 on two X clips; s01 left with its Y clip only
    path = _manifest(tmp_path, rows, "paired.csv")
    line = _one_error(
        tmp_path, f"bias_test.manifest={path}", "bias_test.resampling=paired", "speat.se_curve=true", *FAST
    )
    assert (
        "needs each pair_id on one X and one Y clip; 2 pair id(s) are not (s00 (X: 2, Y: 1); s01 (X: 0, Y: 1))" in line
    )
