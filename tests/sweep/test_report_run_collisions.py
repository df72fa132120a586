"""``python evaluate.py task=report sweep_dir=...`` as typed, over a folder that holds real runs of one model,
test and aggregation made with different settings: one error line naming two of them, what differs and the
fix, exit 1, nothing written; the fix it gives reports; a repeat of one run with the same settings is no
collision."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from entry_commands import run_entry
from sweep.fake_sweep import PAPER_MODELS, write_speat_run

from speechbias.report.run_writer import RunWriter

DEMO_RUN = ("upstream=fbank", "bias_test=demo_voice", "aggregation=mean_sum", "logger=none")


def _demo_run(folder: Path, cache: Path, *settings: str) -> Path:
    """One real SpEAT run of fbank on demo_voice into ``folder`` (a few seconds)."""
    done = run_entry(
        "evaluate.py", *DEMO_RUN, *settings, f"hydra.run.dir={folder}", f"paths.cache_dir={cache}", timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (folder / "results.csv").is_file()
    return folder


def _report(sweep: Path):
    return run_entry("evaluate.py", "task=report", f"sweep_dir={sweep}", "logger=none", timeout=300)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder``: (size, mtime in ns), to see that a command wrote nothing."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Real runs, each in a folder of its own: ``a`` (100 permutations), ``b`` (200), in one folder ``sweep``."""
    root = tmp_path_factory.mktemp("collisions")
    cache = root / "cache"
    sweep = root / "sweep"
    return {
        "root": root,
        "cache": cache,
        "sweep": sweep,
        "a": _demo_run(sweep / "a", cache, "speat.n_permutations=100"),
        "b": _demo_run(sweep / "b", cache, "speat.n_permutations=200"),
    }


def test_two_runs_of_one_model_test_and_aggregation_with_other_settings_are_refused_in_one_line(runs):
    sweep, a, b = runs["sweep"], runs["a"], runs["b"]
    before = _snapshot(sweep)
    done = _report(sweep)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"error: sweep_dir {sweep}: {a} and {b} are two runs of fbank on demo_voice (mean_sum)")
    # what differs, as the two runs' configs say (the command lines typed 100 and 200), and nothing else
    assert "differ in speat.n_permutations: 100 -> 200;" in line
    assert f"sweep_dir={a}" in line  # the fix: one setting's folder
    assert "Traceback" not in done.stdout + done.stderr and "sweep report of" not in done.stdout + done.stderr
    # nothing written: no report folder, not a file below the sweep folder changed
    assert not (sweep / "report").exists()
    assert _snapshot(sweep) == before


def test_the_folder_the_refusal_names_reports(runs):
    a = runs["a"]
    done = _report(a)
    assert done.returncode == 0, done.stderr[-2000:]
    results = (a / "report" / "results.csv").read_text().splitlines()
    assert len(results) == 2 and ",demo_voice,mean_sum," in results[1]  # header + a's one run
    shutil.rmtree(a / "report")


@pytest.mark.slow
def test_an_upstream_setting_that_keeps_the_name_is_named_and_a_repeated_run_is_no_collision(runs):
    """fbank with 40 mel bands is still called fbank (its fingerprint differs): refused, naming the setting;
    the same run made twice (its repeat keeps the newest) reports."""
    root, cache, a = runs["root"], runs["cache"], runs["a"]
    mels = root / "mels"
    shutil.copytree(a, mels / "a")
    mel40 = _demo_run(mels / "c", cache, "speat.n_permutations=100", "upstream.n_mels=40")
    done = _report(mels)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{mels / 'a'} and {mel40} are two runs of fbank on demo_voice (mean_sum)" in lines[0]
    assert "upstream.n_mels: 80 -> 40" in lines[0] and "fingerprint" not in lines[0]  # named, not its hash
    assert not (mels / "report").exists()

    repeat = root / "repeat"
    shutil.copytree(a, repeat / "a")
    _demo_run(repeat / "d", cache, "speat.n_permutations=100")
    done = _report(repeat)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 SpEAT run(s) repeat an earlier run" in done.stderr + done.stdout
    assert len((repeat / "report" / "results.csv").read_text().splitlines()) == 2


@pytest.mark.slow
def test_one_sweep_over_a_setting_is_told_to_sweep_each_setting_into_a_folder_of_its_own(runs):
    """A multirun over ``speat.n_permutations``: its two jobs collide inside one sweep folder, so the fix is
    a sweep folder per setting (reporting one job's folder would be no sweep)."""
    sweep = runs["root"] / "multirun"
    done = run_entry(
        "evaluate.py",
        "-m",
        *DEMO_RUN,
        "speat.n_permutations=100,200",
        f"hydra.sweep.dir={sweep}",
        f"paths.cache_dir={runs['cache']}",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (sweep / "multirun.yaml").is_file()
    before = _snapshot(sweep)
    done = _report(sweep)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "differ in speat.n_permutations: 100 -> 200;" in lines[0]
    assert f"one sweep ({sweep.resolve()}) varied a setting" in lines[0] and "hydra.sweep.dir=" in lines[0]
    assert _snapshot(sweep) == before


def test_runs_without_digests_are_told_apart_by_their_result_columns(tmp_path):
    """Run folders of an older version (no run_digest.json), the second inside the first one's folder and of
    another seed: the line names the seeds from the results, and the fix moves one out (no folder holds one)."""
    sweep = tmp_path / "sweep"
    write_speat_run(sweep / "a", PAPER_MODELS[0], "female_male", 0.31)
    inner = sweep / "a" / "seed1"
    write_speat_run(inner, PAPER_MODELS[0], "female_male", 0.31)
    results = pd.read_csv(inner / "results.csv").assign(seed=1)
    RunWriter(inner).table("results", results)
    before = _snapshot(sweep)
    done = _report(sweep)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    name = PAPER_MODELS[0][0]
    assert (
        f"{sweep / 'a'} and {inner} are two runs of {name} on female_male (mean_sum) that differ in seed 0 vs 1;"
        in (lines[0])
    )
    assert f"move one of them out of {sweep}" in lines[0]
    assert _snapshot(sweep) == before


def test_runs_of_two_seeds_in_sweep_dir_and_an_extra_sweep_dir_name_the_seed_once_and_the_extra_folder(runs):
    """Two folders given together (``sweep_dir`` and ``task.extra_sweep_dirs``): the fix is to leave the extra
    one out, not to report the ``sweep_dir`` already typed; the seed both digests name is said once."""
    root, cache = runs["root"], runs["cache"]
    first = _demo_run(root / "seed0" / "run", cache, "speat.n_permutations=100", "seed=0")
    second = _demo_run(root / "seed1" / "run", cache, "speat.n_permutations=100", "seed=1")
    done = run_entry(
        "evaluate.py",
        "task=report",
        f"sweep_dir={root / 'seed0'}",
        f"task.extra_sweep_dirs=[{root / 'seed1'}]",
        "logger=none",
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{first} and {second} are two runs of fbank on demo_voice (mean_sum)" in lines[0]
    assert lines[0].count("seed") == 1 + lines[0].count("seed0") + lines[0].count("seed1"), lines[0]
    assert f"leave {root / 'seed1'} out of task.extra_sweep_dirs (" in lines[0], lines[0]


@pytest.mark.slow
def test_a_repeat_that_read_other_stimuli_is_refused_naming_the_clip(runs, tmp_path):
    """The same command run twice into two folders, a clip of its manifest re-recorded in between: same
    settings, so no result column tells them apart, but their run digests' clip hashes differ. The report
    refuses them in one line naming the clip (it kept the newest as a repeat before, a run of other stimuli
    left out with a warning about a repeat); nothing written."""
    import soundfile as sf

    demo = Path(__file__).resolve().parents[2] / "experiments" / "demo"
    stimuli = tmp_path / "stimuli"
    shutil.copytree(demo / "audio", stimuli / "audio")
    shutil.copy(demo / "demo_voice.csv", stimuli / "demo_voice.csv")
    sweep, manifest = tmp_path / "sweep", f"bias_test.manifest={stimuli / 'demo_voice.csv'}"
    old = _demo_run(sweep / "old", runs["cache"], "speat.n_permutations=100", manifest)
    # the same stimuli read from another folder: a repeat (the digest keys clips by path, the audio is the same)
    moved = tmp_path / "moved"
    shutil.copytree(stimuli, moved)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(old, elsewhere / "old")
    _demo_run(
        elsewhere / "moved", runs["cache"], "speat.n_permutations=100", f"bias_test.manifest={moved / 'demo_voice.csv'}"
    )
    done = _report(elsewhere)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 SpEAT run(s) repeat an earlier run" in done.stderr + done.stdout
    clip = stimuli / "audio" / "demo_voice" / "female_00.flac"
    audio, rate = sf.read(clip)
    sf.write(clip, audio * 0.5, rate)  # re-recorded: quieter
    new = _demo_run(sweep / "new", runs["cache"], "speat.n_permutations=100", manifest)
    before = _snapshot(sweep)
    done = _report(sweep)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{old} and {new} are two runs of fbank on demo_voice (mean_sum) with the same settings" in lines[0]
    assert "read other stimuli" in lines[0] and "female_00.flac changed (audio sha256" in lines[0]
    assert _snapshot(sweep) == before
