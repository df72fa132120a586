"""Every command line of README.md and experiments/*/README.md, run as written from a fresh folder.

The commands are read from the fenced code blocks (``python evaluate.py ...``, ``python train.py ...``,
``python experiments/...``; ``\\`` continuations joined, ``&&`` chains split, ``NAME=value`` lines of a
block expanded into its later lines) and compared with :data:`EXPECTED`: a README command that
changes fails :func:`test_readme_commands_are_the_expected_ones` until this list follows.

Each command then runs as a subprocess from a fresh temporary working directory, with only these
substitutions (real models and corpora are not available offline) and overrides appended:

================================================  ===========================================================
README                                            here
================================================  ===========================================================
``upstream=hubert_xl`` / ``wavlm_large``          ``upstream=tiny_hubert`` / ``tiny_wavlm`` (random tiny nets)
``'upstream=glob(*,exclude=[...])'``              ``upstream=fbank,mfcc`` (the glob itself is checked to pick
                                                  exactly the 16 paper models: :func:`test_the_paper_glob...`)
``bias_test=female_male`` / ``young_old``         ``bias_test=demo_voice`` / ``demo_accent`` (shipped demo)
``paths.data_root=/data...``                      ``paths.data_root=<tmp>/data``: generated Fair-Speech and
                                                  Spoken StereoSet trees (tests/asr/fixtures.py,
                                                  tests/sllm/conftest.py)
``task.data_dir=/data/spoken_stereoset``          ``task.data_dir=<tmp>/data/spoken_stereoset``
``asr=whisper_small`` / ``whisper_large_v2``      ``asr=tiny_random_whisper`` / ``tiny_random_ctc``
``sllm=qwen2_audio``                              ``sllm=tiny_random_qwen2_audio``
``trainer=gpu``                                   ``trainer=cpu``
``experiment=paper_*`` / ``demo`` sweeps          the experiment, with its sweep cut to fbank (demo: fbank and
                                                  tiny_wav2vec2) x demo_voice (aggregation: mean_mean,max_q3;
                                                  propagation: lr=1e-3 unless the command sets it,
                                                  ser_data=demo, bias_tests=[demo_voice])
``paper_results=../SpEAT/...`` (authors' repo)     the same file's copy under ../shared, by absolute path
``hydra/launcher=slurm|submitit_slurm``,          cannot run here: the command must compose (``--cfg all``)
real checkpoints (``model_id=...``, judge),
the paper's published lists
================================================  ===========================================================

Appended to every run: ``logger=none``, ``paths.output_root``, ``paths.cache_dir`` under tmp,
``paths.multirun_root=<cwd>/multirun`` (so the README's relative ``sweep_dir=multirun/...`` finds the
sweep); evaluate.py's SpEAT task: ``speat.n_permutations=2000 speat.n_resamples=100``; train.py: ``max_steps=20``.
Sweeps run without ``hydra.sweep.dir``. A report command first runs the sweep it reads if this module
has not run it yet. Every run must exit 0 and leave its results files.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "speat_paper"
READMES = [REPO / "README.md", *sorted(REPO.glob("experiments/*/README.md"))]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
ENTRY = re.compile(r"^python3? +(evaluate\.py|train\.py|experiments/\S+\.py)(\s|$)")
ASSIGNMENT = re.compile(r"^(?:export +)?([A-Za-z_][A-Za-z0-9_]*)=(\S+)$")


def readme_commands(path: Path) -> list[str]:
    """The entry-point command lines in the fenced code blocks of one README, whitespace-normalised."""
    found = []
    for block in FENCE.findall(path.read_text(encoding="utf-8")):
        variables: dict[str, str] = {}
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()  # comments (never inside our quoted overrides)
            assignment = ASSIGNMENT.match(line)
            if assignment:
                variables[assignment.group(1)] = assignment.group(2)
                continue
            for name, value in variables.items():
                line = re.sub(rf"\${name}\b", value, line)
            for part in line.split("&&"):
                part = " ".join(part.split())
                if ENTRY.match(part):
                    found.append(part)
    return found


EXPECTED = {
    "README.md": [
        "python evaluate.py",
        "python evaluate.py upstream=hubert_xl bias_test=female_male paths.data_root=/data/speat",
        "python evaluate.py upstream=hf model_id=/models/my-wavlm bias_test=young_old",
        "python evaluate.py upstream=wavlm_large upstream.randomize=true",
        "python evaluate.py aggregation=max_q3",
        "python evaluate.py 'bias_test=[demo_voice,demo_accent]' 'aggregation=[mean_sum,max_q3]'",
        "python evaluate.py -m 'upstream=glob(*,exclude=[tiny_*,hf,s3prl,fbank,mfcc,random_*])' "
        "bias_test=female_male,young_old",
        "python evaluate.py -m experiment=paper_speat hydra/launcher=parallel",
        "python evaluate.py task=report sweep_dir=multirun/paper_speat",
        "python train.py upstream=hubert_xl lr=1e-4",
        "python train.py upstream=hubert_xl lr=1e-4 ser_data=mess "
        "'bias_tests=[abled_disabled,european_african_american,female_male,human_synthesized,us_foreign,young_old]' "
        "paths.data_root=/data/speat",
        "python train.py upstream=hubert_xl 'lr=[1e-3,1e-4,1e-5]'",
        "python train.py -m experiment=paper_propagation",
        "python evaluate.py task=wer_disparity",
        "python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech",
        "python evaluate.py task=spoken_stereoset",
        "python evaluate.py task=spoken_stereoset sllm=qwen2_audio task.data_dir=/data/spoken_stereoset",
        # SLURM and multi-GPU (compose only here; tests/slurm runs the CPU ones on a one-node cluster)
        "python evaluate.py -m upstream=fbank,mfcc bias_test=demo_voice hydra/launcher=slurm "
        "hydra.launcher.partition=gpu trainer=gpu",
        "python train.py -m upstream=hubert_xl hydra/launcher=slurm hydra.launcher.tasks_per_node=4 trainer=ddp",
        "python evaluate.py -m upstream=fbank,mfcc bias_test=demo_voice hydra/launcher=slurm "
        "hydra.launcher.gpus_per_node=0 hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=2",
        "python train.py -m upstream=fbank hydra/launcher=slurm hydra.launcher.tasks_per_node=2 trainer=ddp "
        "trainer.accelerator=cpu hydra.launcher.gpus_per_node=0 hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=4",
        "python train.py -m upstream=fbank hydra/launcher=slurm hydra.launcher.nodes=2 hydra.launcher.tasks_per_node=1 "
        "trainer=ddp trainer.accelerator=cpu hydra.launcher.gpus_per_node=0 hydra.launcher.cpus_per_task=1 "
        "hydra.launcher.mem_gb=2",
    ],
    "experiments/fair_speech_2024/README.md": [
        "python evaluate.py task=wer_disparity",
        "python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech paths.data_root=/data",
        "python evaluate.py -m task=wer_disparity asr=whisper_small,whisper_large_v2 corpus=fair_speech",
        "python evaluate.py -m hydra/launcher=slurm task=wer_disparity asr=whisper_large_v2 "
        "corpus=fair_speech task.shard_count=4 task.shard_index=0,1,2,3",
        "python evaluate.py task=wer_disparity asr=whisper_large_v2 corpus=fair_speech",
    ],
    "experiments/speat_2023/README.md": [
        "python evaluate.py bias_test=female_male paths.data_root=/data",
        "python evaluate.py bias_test=female_male paths.data_root=/data bias_test.builder.selection=paper "
        "bias_test.builder.paper_lists_dir=/path/to/SpEAT/data",
        "python evaluate.py -m experiment=paper_speat",
        "python evaluate.py -m experiment=paper_speat hydra/launcher=parallel hydra.launcher.n_jobs=4 trainer=cpu",
        "python evaluate.py -m experiment=paper_se_curves",
        "python evaluate.py -m experiment=paper_aggregation hydra/launcher=parallel",
        "python evaluate.py -m experiment=paper_uk",
        "python evaluate.py -m experiment=paper_alternates",
        "python train.py -m experiment=paper_propagation",
        "python train.py -m experiment=paper_propagation 'hydra.sweeper.params.lr=\"[1e-3,1e-4,1e-5]\"'",
        "python evaluate.py -m experiment=demo hydra/launcher=parallel",
        "python evaluate.py -m experiment=paper_speat hydra/launcher=slurm trainer=gpu hydra.launcher.partition=gpu "
        "hydra.launcher.timeout_min=120 'hydra.launcher.setup=[\"source /path/to/.venv/bin/activate\"]'",
        "python train.py -m experiment=paper_propagation hydra/launcher=slurm trainer=gpu hydra.launcher.partition=gpu",
        "python evaluate.py task=report sweep_dir=multirun/paper_speat "
        "paper_results=../SpEAT/plots/eats/test_results/all_mean_mean_results.csv",
        "python evaluate.py task=report sweep_dir=multirun/paper_se_curves",
        "python evaluate.py task=report sweep_dir=multirun/paper_aggregation task.main_aggregation=mean_mean",
        "python evaluate.py task=report sweep_dir=multirun/paper_propagation "
        "'task.extra_sweep_dirs=[multirun/paper_speat]'",
        "python evaluate.py task=report sweep_dir=multirun/demo",
    ],
    "experiments/spoken_stereoset_2024/README.md": [
        "python evaluate.py task=spoken_stereoset",
        "python evaluate.py task=spoken_stereoset sllm=qwen2_audio task.data_dir=/data/spoken_stereoset",
        "python evaluate.py task=spoken_stereoset sllm=qwen2_audio task.data_dir=/data/spoken_stereoset "
        "task.text_only=true",
        "python evaluate.py task=spoken_stereoset sllm=qwen2_audio task.data_dir=/data/spoken_stereoset "
        "task.orders=all",
        "python evaluate.py task=spoken_stereoset sllm=chat_audio_llm model_id=mistralai/Voxtral-Mini-3B-2507 "
        "task.data_dir=/data/spoken_stereoset",
        "python evaluate.py task=spoken_stereoset '~sllm' task.data_dir=/data/spoken_stereoset",
        "python evaluate.py task=spoken_stereoset sllm=qwen2_audio task.data_dir=/data/spoken_stereoset "
        "task.judge='{_target_: speechbias.sllm.adapters.judge.ChatJudge, model_id: Qwen/Qwen2.5-7B-Instruct}'",
    ],
}

# README token -> the tokens run instead (see the module docstring); None drops the token
TOKEN_SUBSTITUTIONS = {
    "upstream=hubert_xl": ["upstream=tiny_hubert"],
    "upstream=wavlm_large": ["upstream=tiny_wavlm"],
    "upstream=glob(*,exclude=[tiny_*,hf,s3prl,fbank,mfcc,random_*])": ["upstream=fbank,mfcc"],
    "bias_test=female_male": ["bias_test=demo_voice"],
    "bias_test=young_old": ["bias_test=demo_accent"],
    "bias_test=female_male,young_old": ["bias_test=demo_voice,demo_accent"],
    "asr=whisper_small": ["asr=tiny_random_whisper"],
    "asr=whisper_large_v2": ["asr=tiny_random_ctc"],
    "asr=whisper_small,whisper_large_v2": ["asr=tiny_random_whisper,tiny_random_ctc"],
    "sllm=qwen2_audio": ["sllm=tiny_random_qwen2_audio"],
    "trainer=gpu": ["trainer=cpu"],
    "paper_results=../SpEAT/plots/eats/test_results/all_mean_mean_results.csv": [
        f"paper_results={SHARED / 'results' / 'all_mean_mean_results.csv'}"
    ],
}
# experiment -> sweeper params that cut its sweep to the offline stand-ins (unless the command sets them)
SWEEP_CUTS = {
    # a list: one job of both tests, as the experiment's one job per model
    "paper_speat": {"upstream": "fbank", "bias_test": "[demo_voice,demo_accent]"},
    "paper_se_curves": {"upstream": "fbank", "bias_test": "demo_voice"},
    "paper_uk": {"upstream": "fbank", "bias_test": "demo_voice"},
    "paper_alternates": {"upstream": "fbank", "bias_test": "demo_voice"},
    "paper_aggregation": {
        "upstream": "fbank",
        "bias_test": "[demo_voice,demo_accent]",
        "aggregation": "[mean_mean,max_q3]",
    },
    "demo": {"upstream": "fbank,tiny_wav2vec2", "bias_test": "demo_voice"},
    "paper_propagation": {"upstream": "fbank", "lr": "1e-3"},
}
EXTRA_FOR_EXPERIMENT = {"paper_propagation": ["ser_data=demo", "bias_tests=[demo_voice]"]}
# commands that can only be composed here, and why
COMPOSE_ONLY = {
    "hydra/launcher=slurm": "submits SLURM jobs",
    "hydra/launcher=submitit_slurm": "submits SLURM jobs",
    "model_id=": "needs a real checkpoint (hub id or local directory)",
    "task.judge=": "needs the Qwen2.5-7B-Instruct judge",
    "bias_test.builder.selection=paper": "needs the SpEAT authors' published lists and the corpora",
    "ser_data=mess": "needs the MESS corpus and the paper's corpora",
}
# a report command's sweep folder -> the README command that writes it
SWEEP_OF_REPORT = {
    "multirun/paper_speat": "python evaluate.py -m experiment=paper_speat",
    "multirun/paper_se_curves": "python evaluate.py -m experiment=paper_se_curves",
    "multirun/paper_aggregation": "python evaluate.py -m experiment=paper_aggregation hydra/launcher=parallel",
    "multirun/paper_propagation": "python train.py -m experiment=paper_propagation",
    "multirun/demo": "python evaluate.py -m experiment=demo hydra/launcher=parallel",
}
# commands known to fail today, with the reason (strict: an xfail that passes fails, so drop it then)
KNOWN_FAILURES: dict[str, str] = {}

ALL_COMMANDS = [c for cmds in EXPECTED.values() for c in cmds]
UNIQUE_COMMANDS = list(dict.fromkeys(ALL_COMMANDS))


def compose_only_reason(command: str) -> str | None:
    return next((why for key, why in COMPOSE_ONLY.items() if key in command), None)


# README placeholders -> a value of the same kind (for commands that only compose); the READMEs have none now
PLACEHOLDERS: dict[str, str] = {}


def substituted(command: str, workspace: dict) -> list[str]:
    """argv of ``command`` with the substitutions and appended overrides of the module docstring."""
    for placeholder, value in PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    argv = shlex.split(command)
    script, args = argv[1], argv[2:]
    keep_real = compose_only_reason(command) is not None
    out = []
    for token in args:
        if keep_real:
            out.append(token)
        elif token in TOKEN_SUBSTITUTIONS:
            out.extend(TOKEN_SUBSTITUTIONS[token])
        elif token.startswith("paths.data_root="):
            out.append(f"paths.data_root={workspace['data']}")
        elif token.startswith("task.data_dir=/data/"):
            out.append(f"task.data_dir={workspace['data']}/{token.split('/data/', 1)[1]}")
        else:
            out.append(token)
    experiment = next((t.split("=", 1)[1] for t in args if t.startswith("experiment=")), None)
    if experiment and not keep_real:
        for key, value in SWEEP_CUTS.get(experiment, {}).items():
            if not any(t.startswith(f"hydra.sweeper.params.{key}=") for t in args):
                out.append(f'hydra.sweeper.params.{key}="{value}"')  # quoted: a value, not a sweep of hydra
        out += EXTRA_FOR_EXPERIMENT.get(experiment, [])
    if "hydra/launcher=parallel" in args and not any(t.startswith("hydra.launcher.n_jobs=") for t in args):
        out.append("hydra.launcher.n_jobs=2")
    if "corpus=fair_speech" in args and not any(t.startswith("paths.data_root=") for t in args):
        out.append(f"paths.data_root={workspace['data']}")
    out += [
        "logger=none",
        f"paths.output_root={workspace['outputs']}",
        f"paths.cache_dir={workspace['cache']}",
        f"paths.multirun_root={workspace['cwd'] / 'multirun'}",
    ]
    task = next((t.split("=", 1)[1] for t in reversed(args) if t.startswith("task=")), "speat")
    if script == "train.py":
        out.append("max_steps=20")
    elif task == "speat":  # another task reads no speat.* (it would refuse the keys in one line)
        out += ["speat.n_permutations=2000", "speat.n_resamples=100"]
    return [sys.executable, str(REPO / script), *out]


def composed_once(argv: list[str]) -> list[str]:
    """argv of a single composition (``--cfg all``, which Hydra refuses together with ``-m``): no ``-m``,
    and each sweep list ``key=a,b`` (commas outside brackets) replaced by its first value."""
    out = []
    for token in argv:
        if token == "-m":
            continue
        key, sep, value = token.partition("=")
        if sep and "," in value and not value.startswith(("[", "{", "glob(")):
            token = f"{key}={value.split(',')[0]}"
        out.append(token)
    return out + ["--cfg", "all"]


def run_command(command: str, workspace: dict, compose: bool = False) -> subprocess.CompletedProcess:
    argv = substituted(command, workspace)
    argv = composed_once(argv) if compose else argv
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", WANDB_MODE="offline")
    env.pop("SPEECHBIAS_DATA", None)
    env.pop("SPEECHBIAS_CACHE", None)
    return subprocess.run(argv, cwd=workspace["cwd"], env=env, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict:
    """A fresh working directory, cache, outputs, and a data root with generated corpora."""
    from asr.fixtures import make_fair_speech_tree
    from sllm.conftest import make_tree

    root = tmp_path_factory.mktemp("readme")
    ws = {"cwd": root / "cwd", "cache": root / "cache", "outputs": root / "outputs", "data": root / "data"}
    ws["cwd"].mkdir()
    make_fair_speech_tree(ws["data"] / "fair_speech")
    make_tree(ws["data"] / "spoken_stereoset")
    return ws


def test_readme_commands_are_the_expected_ones():
    for readme in READMES:
        name = str(readme.relative_to(REPO))
        assert readme_commands(readme) == EXPECTED.get(name, []), (
            f"{name}: its commands changed; update EXPECTED (and the substitutions) in {Path(__file__).name}"
        )
    assert set(EXPECTED) <= {str(r.relative_to(REPO)) for r in READMES}


def test_the_paper_glob_picks_exactly_the_16_paper_models():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (override,) = OverridesParser.create().parse_overrides(
        ["upstream=glob(*,exclude=[tiny_*,hf,s3prl,fbank,mfcc,random_*])"]
    )
    options = sorted(p.stem for p in (REPO / "conf" / "upstream").glob("*.yaml"))
    picked = set(override.value().filter(options))
    paper = {
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
    assert picked == paper


def _cases(compose: bool):
    for command in UNIQUE_COMMANDS:
        if (compose_only_reason(command) is not None) != compose:
            continue
        marks = [] if compose else [pytest.mark.slow]
        if command in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[command]))
        yield pytest.param(command, marks=marks, id=command.replace("python ", "")[:90])


@pytest.mark.parametrize("command", list(_cases(compose=True)))
def test_command_that_cannot_run_here_composes(command, workspace):
    proc = run_command(command, workspace, compose=True)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    assert "hydra:" in proc.stdout and "task:" in proc.stdout
    if "launcher=slurm" in command or "launcher=submitit_slurm" in command:
        assert "submitit" in proc.stdout  # the SLURM launcher's settings composed


RESULT_FILES = ("results.json", "summary.json")


def _results_of(workspace: dict, since: float) -> list[Path]:
    """Results files a single run wrote since ``since``."""
    root = workspace["outputs"]
    return [p for n in RESULT_FILES for p in root.rglob(n) if p.stat().st_mtime >= since]


def _check_sweep(workspace: dict, since: float) -> None:
    """The sweep this command ran (its ``sweep_status.csv``, written at the end of every sweep, new since
    ``since``) lists every job ok or skipped (a rerun skips finished jobs), each with its results file."""
    statuses = [p for p in (workspace["cwd"] / "multirun").rglob("sweep_status.csv") if p.stat().st_mtime >= since]
    assert len(statuses) == 1, statuses
    table = pd.read_csv(statuses[0])
    assert len(table) and set(table["status"]) <= {"ok", "skipped"}, table.to_string()
    for job in table["job"]:
        assert any((statuses[0].parent / str(job) / n).is_file() for n in RESULT_FILES), job


@pytest.mark.parametrize("command", list(_cases(compose=False)))
def test_command_runs_with_offline_stand_ins(command, workspace):
    if "paper_results=" in command and not SHARED.is_dir():
        pytest.skip(f"{SHARED} not available (the paper's results stand in for the authors' file)")
    sweep_dir = next((t.split("=", 1)[1] for t in shlex.split(command) if t.startswith("sweep_dir=")), None)
    if sweep_dir and not (workspace["cwd"] / sweep_dir).is_dir():
        prerequisite = run_command(SWEEP_OF_REPORT[sweep_dir], workspace)
        assert prerequisite.returncode == 0, prerequisite.stderr[-3000:]
    for extra in re.findall(r"extra_sweep_dirs=\[([^\]]+)\]", command):
        for d in extra.split(","):
            if not (workspace["cwd"] / d).is_dir():
                assert run_command(SWEEP_OF_REPORT[d], workspace).returncode == 0
    started = time.time()
    proc = run_command(command, workspace)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
    if sweep_dir:
        assert (workspace["cwd"] / sweep_dir / "report" / "report.md").is_file()
    elif " -m " in f" {command} ":
        assert "job failed" not in proc.stderr, proc.stderr[-3000:]
        _check_sweep(workspace, started)
    else:
        assert _results_of(workspace, started), f"{command}: no results files written"
