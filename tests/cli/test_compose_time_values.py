"""Every value a user types is checked at compose time: for every leaf key of the composed evaluate.py (each
task) and train.py configs, one wrong-typed or out-of-range value typed on the command line ends the command
with exit 1 and one ``error: `` line naming that key, before torch is imported and before any folder is made.

Typing each key as a subprocess would take minutes, so one subprocess per entry point runs, for every key,
what the entry point runs before a run's folder: ``check_command_line``, Hydra's compose with the override as
typed, and ``ConfigCheckCallback.on_run_start`` (whose user error prints its line and exits 1), then records
the exit code, stderr, whether torch is in ``sys.modules`` and whether the cache or output folder exists.
The bad values are written here from the libraries' own rules (Lightning refuses ``devices=0``, a count of 0
is no count, ...), not read from the settings classes; a typed near miss of an enumerated value must get a
did-you-mean. Keys where any string is right at compose time (ANY_STRING) or whose out-of-range value is told
only later (TOLD_LATER) are tried with a wrong type and say why. The commands the issue names are also run as
typed (subprocesses).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.entry_commands import REPO, run_entry

# (entry config, overrides): evaluate.py with each task (a report reads the audit's sweep folder), train.py
ENTRIES = {
    "evaluate": ("evaluate", ()),
    "evaluate task=wer_disparity": ("evaluate", ("task=wer_disparity",)),
    "evaluate task=spoken_stereoset": ("evaluate", ("task=spoken_stereoset",)),
    "evaluate task=report": ("evaluate", ("task=report", "sweep_dir={tmp}/sweep")),
    "train": ("train", ()),
}
# options that bring keys of their own (slow: 12-15 CPU-s each)
OPTION_ENTRIES = {
    "evaluate upstream=wav2vec2_base trainer=ddp": ("evaluate", ("upstream=wav2vec2_base", "trainer=ddp")),
    "evaluate upstream=s3prl": ("evaluate", ("upstream=s3prl", "upstream.name=fbank")),
    "evaluate bias_test=female_male": ("evaluate", ("bias_test=female_male",)),
    "evaluate task=wer_disparity asr=whisper_small": ("evaluate", ("task=wer_disparity", "asr=whisper_small")),
    "evaluate task=wer_disparity corpus=fair_speech": ("evaluate", ("task=wer_disparity", "corpus=fair_speech")),
    "evaluate task=spoken_stereoset sllm=chat_audio_llm": (
        "evaluate",
        ("task=spoken_stereoset", "sllm=chat_audio_llm"),
    ),
    "evaluate task=spoken_stereoset sllm=policy": ("evaluate", ("task=spoken_stereoset", "sllm=policy")),
}

# key -> (the value typed, a text the error line must hold besides the key: a did-you-mean for a near miss)
BAD_VALUES = {
    "seed": ("-1", ""),  # numpy's and torch's seeds: 0 .. 2**32-1
    "check_audio": ("ful", "did you mean full?"),
    "trainer.accelerator": ("tpu", ""),  # no torch_xla, and no TPU batch size
    "trainer.devices": ("0", ""),  # Lightning: "Trainer(devices=0) value is not a valid input"
    "trainer.precision": ("16mixed", "did you mean 16-mixed"),
    "logger.kind": ("wandbb", "did you mean wandb?"),
    "logger.mode": ("offlin", "did you mean offline"),
    "logger.tags": ("5", ""),  # a list of tags
    "selection.name": ("papers", "did you mean paper?"),
    "aggregation.temporal": ("meen", "did you mean mean?"),
    "aggregation.layer": ("sums", "did you mean sum?"),
    "propagation.aggregation.temporal": ("maxx", "did you mean max?"),
    "propagation.aggregation.layer": ("sums", "did you mean sum?"),
    "bias_test.resampling": ("pairs", "did you mean paired?"),
    "bias_test.manifest": ("no_such_manifest.csv", ""),
    "bias_test.demo_manifest": ("[a,b]", ""),
    "bias_test.human_iat_d": ("abc", ""),
    "upstream.n_mels": ("0", ""),
    "upstream.n_fft": ("0", ""),
    "upstream.win_ms": ("0", ""),
    "upstream.hop_ms": ("0", ""),
    "upstream.f_min": ("-1", ""),
    "upstream.f_max": ("0", ""),
    "upstream.seed": ("-1", ""),
    "speat.n_permutations": ("0", ""),
    "speat.n_resamples": ("0", ""),
    "extraction.batch_size_per_accelerator.cpu": ("0", ""),
    "extraction.batch_size_per_accelerator.gpu": ("0", ""),
    "extraction.batch_size": ("0", ""),
    "extraction.num_workers": ("-1", ""),
    "extraction.max_clip_seconds": ("0", ""),
    "extraction.memory_gib": ("0", ""),  # GiB the limit of a clip's length is derived from: > 0
    # train.py
    "lr": ("0", ""),  # Adam: a rate > 0
    "max_steps": ("0", ""),
    "steps_per_call": ("0", ""),
    "checkpoint_every_n_epochs": ("0", ""),
    "torch_threads": ("0", ""),
    "fit_threads": ("0", ""),
    "bias_tests": ("[]", ""),  # nothing to measure propagation on
    "ser_data.dev_fraction": ("1", ""),  # no clip left to train on
    "ser_data.split_seed": ("-1", ""),
    "ser_data.batch_size": ("0", ""),
    "ser_data.val_every_n_epochs": ("0", ""),
    "ser_data.max_steps": ("0", ""),
    "ser_data.torch_threads": ("0", ""),
    "ser_data.source.ratings": ("no_such_ratings.csv", ""),
    "ser_data.source.low": ("200", ""),  # above the scale's high (100)
    "ser_data.source.high": ("-5", ""),  # below the scale's low (0)
    "propagation.speat_results": ("no_such_results.csv", ""),  # read after training
    "downstream.hidden_size": ("0", ""),
    "downstream.step_kernel": ("compild", "did you mean compiled?"),
    # evaluate.py task=wer_disparity
    "asr.family": ("wav2vec3", ""),
    "asr.seed": ("-1", ""),
    "asr.batch_size": ("0", ""),
    "asr.device": ("cpux", ""),  # torch.device("cpux") fails
    "corpus.load.manifest": ("no_such_manifest.csv", ""),
    "corpus.load.category_columns": ("[no_such_column]", ""),  # columns of the manifest's header
    "corpus.load.path_column": ("no_such_column", ""),
    "corpus.load.transcript_column": ("no_such_column", ""),
    "corpus.load.id_column": ("no_such_column", ""),
    "corpus.load.speaker_column": ("no_such_column", ""),
    "corpus.load.root": ("no_such_folder", ""),  # the manifest's paths are relative to it
    "corpus.load.sep": ("[a,b]", ""),
    "corpus.min_group.utterances": ("0", ""),
    "corpus.min_group.speakers": ("0", ""),
    "task.normalizer": ("whisper_englsh", "did you mean whisper_english"),
    "task.categories": ("[no_such_category]", ""),
    "task.shard_index": ("1", ""),  # one shard: index 0 only
    "task.shard_count": ("0", ""),
    "task.wer_ci_resamples": ("0", ""),
    "task.glmm.n_agq": ("0", ""),
    "task.glmm.n_resamples": ("0", ""),
    "task.glmm.confidence": ("1", ""),
    "task.glmm.n_jobs": ("0", ""),
    "task.glmm.covariates": ("[voice_gendr]", "did you mean voice_gender?"),  # the demo corpus's category
    # evaluate.py task=spoken_stereoset
    "sllm.seed": ("-1", ""),
    "sllm.device": ("cpux", ""),
    "sllm.dtype": ("float33", "did you mean float32"),
    "task.data_dir": ("no_such_folder", ""),
    "task.demo_caveat": ("autoo", "did you mean auto?"),
    "task.version": ("v9.9", ""),  # metadata/<domain>_<version>.csv
    "task.domains": ("[gendr]", "did you mean gender?"),
    "task.on_missing_audio": ("skp", "did you mean skip?"),
    "task.max_items": ("0", ""),
    "task.orders": ("shufled", "did you mean shuffled?"),
    "task.batch_size": ("0", ""),
    "task.sampling.temperature": ("-1", ""),
    "task.sampling.top_p": ("0", ""),
    "task.sampling.top_k": ("-1", ""),
    "task.sampling.max_new_tokens": ("0", ""),
    "task.prompt.audio": ("'Which one?'", ""),  # no {options}
    "task.prompt.text_only": ("'{options}'", ""),  # no {transcript}
    "task.prompt.option": ("'{letter}'", ""),  # no {text}
    "task.answer.cer_threshold": ("2", ""),
    "task.answer.min_word_recall": ("-0.5", ""),
    "task.statistics.rouge_method": ("rapidfuz", "did you mean rapidfuzz?"),
    "task.statistics.histogram_bins": ("0", ""),
    # evaluate.py task=report
    "sweep_dir": ("no_such_folder", ""),
    "paper_results": ("no_such_results.csv", ""),
    "task.extra_sweep_dirs": ("[no_such_folder]", ""),
    "task.alpha": ("1", ""),
    "task.corrections": ("[bonferoni]", "did you mean bonferroni?"),
    "task.main_aggregation": ("mean_summ", "did you mean mean_sum"),
    "task.paper_equivalent_aggregations": ("[mean_summ]", "did you mean mean_sum"),
    "task.paper_models": ("abc", ""),  # a mapping of the paper's names to hub ids
    "task.paper_tests": ("abc", ""),  # a mapping of the paper's names to bias test names
    # options' own keys
    "upstream.model_id": ("no_such/model", "'no_such/model'"),  # neither in the Hugging Face cache nor a folder
    "upstream.family": ("wav2vec3", "did you mean wav2vec2"),
    "upstream.layer_convention": ("block-io-v2", "did you mean block-io-v1?"),
    "upstream.dtype": ("float33", "did you mean float32"),
    "upstream.normalize": ("maybe", ""),
    "upstream.min_samples": ("0", ""),
    "trainer.strategy": ("dpp", "did you mean ddp"),
    "bias_test.builder.test": ("female_mal", "did you mean female_male"),
    "bias_test.builder.selection": ("papers", "did you mean paper?"),
    "bias_test.builder.seed": ("-1", ""),
    "bias_test.builder.corpus_dirs": ("abc", ""),  # a mapping of corpus names to folders
    "asr.model_id": ("no_such/model", "'no_such/model'"),
    "asr.task": ("transcrib", "did you mean transcribe?"),
    "asr.num_beams": ("0", ""),
    "asr.max_new_tokens": ("0", ""),
    "asr.dtype": ("float33", "did you mean float32"),
    "corpus.load.categories": ("5", ""),
    "corpus.load.l1_languages": ("5", ""),
    "corpus.load.undisclosed_values": ("5", ""),
    "sllm.model_id": ("no_such/model", "'no_such/model'"),
    "sllm.policy": ("stereotypicl", "did you mean stereotypical"),
    "sllm.style": ("lettr", "did you mean letter?"),
}
# keys whose out-of-range value cannot be told at compose time, each with a wrong-typed value and why
TOLD_LATER: dict[str, tuple[str, str]] = {}
# files only one task reads (task.name): under another task only the value's type can be told
TASK_FILES = {"bias_test.manifest": "speat"}
# an option's own reading of a key (only a wrong type can be told there, and why)
ENTRY_VALUES = {
    # a corpus-built test's manifest is where its build writes
    "evaluate bias_test=female_male": {"bias_test.manifest": ("[a,b]", "")},
    # the corpus's folder is not here (data/fair_speech): no table to read the speaker column from
    "evaluate task=wer_disparity corpus=fair_speech": {
        "corpus.load.speaker_column": ("[a,b]", ""),
        "task.glmm.covariates": ("[gendr]", "did you mean gender?"),  # the corpus's categories: no file read
    },
}
# a model whose files cannot be had is named by its id, as given through <group>=<option> or <group>.model_id;
# the task's file checks run with it (a bad input file and missing weights are named in one line), and the clip
# check records the demo clips' audio in the cache (its folder made)
NAMED_BY_MODEL = ("upstream.model_id", "asr.model_id", "sllm.model_id")
# mappings tried whole (their keys are the paper's names, with spaces and dots: not typed as keys)
MAPPINGS = ("task.paper_models", "task.paper_tests")
# keys for which any string is right at compose time (a folder the run makes, a name or label it only
# shows): only a wrong type can be told, tried as a list
ANY_STRING = {
    "paths.": "folders: a folder that does not exist yet is made by the run (a read-only one is refused "
    "as paths.cache_dir / hydra.run.dir when the checks probe it)",
    "model_id": "upstream=hf's hub id or local folder: looked up only when upstream=hf uses it",
    "upstream.display_name": "a name the run's tables show",
    "bias_test.name": "the test's name in its tables",
    "bias_test.x_label": "a label",
    "bias_test.y_label": "a label",
    "bias_test.a_label": "a label",
    "bias_test.b_label": "a label",
    "bias_test.description": "a description",
    "selection.paper_lists_dir": "read only by selection=paper",
    "logger.project": "a W&B project name (W&B creates it)",
    "logger.entity": "a W&B entity (only W&B's server can tell)",
    "logger.group": "a W&B group name",
    "logger.files_dir": "a folder W&B makes",
    "ser_data.name": "the valence set's name in the run's tables",
    "ser_data.source.name": "the valence set's name in the run's tables",
    "asr.cache_dir": "the Hugging Face cache: a folder the download makes",
    "corpus.name": "the corpus's name in the run's tables",
    "sllm.name": "the model's name in the run's tables",
    "task.title": "report.md's title",
    "upstream.revision": "a hub revision: the cache holds a snapshot per commit (a missing one is named with the model)",
    "upstream.cache_dir": "the Hugging Face cache folder",
    "upstream.name": "s3prl's upstream name: s3prl's hub is known by importing s3prl (torch)",
    "upstream.path_or_url": "s3prl's checkpoint path or URL",
    "bias_test.builder.paper_lists_dir": "read only by selection=paper",
    "bias_test.builder.data_root": "the corpora's folder (a missing corpus is named by its own key)",
    "bias_test.builder.manifest_path": "a file the build writes",
    "bias_test.root": "the folder of relative clip paths",
    "asr.name": "the model's name in the run's tables",
    "asr.revision": "a hub revision",
    "asr.language": "Whisper's language: its names are known by importing transformers' tokenizer",
    "corpus.load.root": "the corpus's folder",
    "corpus.load.metadata": "a TSV inside corpus.load.root (null: the only one there)",
    "corpus.load.audio_dir": "a folder inside corpus.load.root",
    "sllm.revision": "a hub revision",
    "sllm.system_prompt": "any text",
    "sllm.model_class": "a transformers class: known by importing transformers",
    "sllm.processor_class": "a transformers class: known by importing transformers",
}
# leaves that are not values a user sets
NOT_VALUES = {
    "task.run": "the task object's wiring: each value points at a key tried here",
    "task.name": "chosen by task=...; an unknown task is refused by the config group option check",
    "paths.output_dir": "Hydra's run folder (hydra.run.dir), made by Hydra",
    "task.run_dir": "the report's folder, derived from sweep_dir (tried here)",
    "task.judge": "an optional LLM judge: a _target_ and its own arguments, or null",
    "bias_test.builder.params": "the selection procedure's own keyword overrides, different for each procedure",
    "upstream.extra_conf": "s3prl's own options of the upstream, passed on as they are",
}
INSTANTIATION_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_")


def leaf_keys(node, prefix: str = ""):
    """The user keys of a composed config: every leaf (a list is one key; the hydra node is skipped)."""
    from omegaconf import DictConfig, OmegaConf

    for key in node.keys():
        full = f"{prefix}.{key}" if prefix else str(key)
        if full == "hydra":
            continue
        child = node._get_node(key)
        if full in MAPPINGS:
            yield full
        elif isinstance(child, DictConfig) and not OmegaConf.is_interpolation(node, key) and not child._is_none():
            yield from leaf_keys(child, full)
        else:
            yield full


def listed(key: str, table: dict) -> bool:
    return any(key == k or key.startswith(k if k.endswith(".") else k + ".") for k in table)


def tried_value(key: str, default, task: str) -> tuple[str, str] | None:
    """The value typed for ``key`` (of a config of ``task``) and the text its error must hold; None for a
    leaf that is no value."""
    if key.rsplit(".", 1)[-1] in INSTANTIATION_KEYS or listed(key, NOT_VALUES):
        return None
    if key in TOLD_LATER:
        return (TOLD_LATER[key][0], "")
    if TASK_FILES.get(key, task) != task:
        return ("[a,b]", "")
    if key in BAD_VALUES:
        return BAD_VALUES[key]
    if isinstance(default, bool):
        return ("maybe", "")
    if listed(key, ANY_STRING):
        return ("[a,b]", "")
    raise AssertionError(f"{key} (default {default!r}): give it a bad value in BAD_VALUES or a reason in a table")


def audit(entry: str, tmp: str) -> None:
    """Print one JSON line per user key of ``entry``'s composed config (:data:`ENTRIES`, :data:`OPTION_ENTRIES`):
    what typing its bad value gives (run in a subprocess of its own: torch must not be imported)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from speechbias.launch.config_checks import ConfigCheckCallback, check_command_line
    from speechbias.launch.entry import register_project_root

    register_project_root(REPO)
    conf = REPO / "conf"
    cache, outputs = Path(tmp) / "cache", Path(tmp) / "outputs"
    (Path(tmp) / "sweep" / "job" / ".hydra").mkdir(parents=True)  # a sweep folder to report on
    name, overrides = {**ENTRIES, **OPTION_ENTRIES}[entry]
    folders = [*(o.format(tmp=tmp) for o in overrides), f"paths.cache_dir={cache}", f"paths.output_root={outputs}"]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        defaults = compose(name, overrides=folders, return_hydra_config=True)
    for key in leaf_keys(defaults):
        default = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
        tried = ENTRY_VALUES.get(entry, {}).get(key) or tried_value(key, default, defaults.task.name)
        if tried is None:
            continue
        typed = [*folders, f"{key}={tried[0]}"]  # the key's value last: it wins over the test's folders
        stderr, code = io.StringIO(), 0
        with contextlib.redirect_stderr(stderr):
            try:
                check_command_line(conf, typed, config_name=name)
                with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
                    cfg = compose(name, overrides=typed, return_hydra_config=True)
                ConfigCheckCallback().on_run_start(cfg)
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # a traceback where one line was due
                code, stderr = f"{type(exc).__name__}: {exc}", io.StringIO()
        made = [str(p) for p in (cache, outputs) if p.exists()]
        for path in made:
            shutil.rmtree(path)
        line = {"key": key, "typed": typed[-1], "expect": tried[1], "code": code}
        line.update(stderr=stderr.getvalue(), torch="torch" in sys.modules, made=made)
        print(json.dumps(line), flush=True)


@pytest.mark.parametrize("entry", [*ENTRIES, *(pytest.param(e, marks=pytest.mark.slow) for e in OPTION_ENTRIES)])
def test_a_bad_value_of_every_key_is_one_line_naming_it_before_torch_and_any_folder(tmp_path, entry):
    probe = f"from tests.cli.test_compose_time_values import audit; audit({entry!r}, {str(tmp_path)!r})"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=600, env=_offline()
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    failures = []
    for row in rows:
        lines = row["stderr"].strip().splitlines()
        line = lines[0] if len(lines) == 1 else ""
        model = row["key"] in NAMED_BY_MODEL
        key_named = line.startswith(f"error: {row['key']}=") or f" {row['key']}=" in line or model
        if row["code"] != 1 or not key_named or row["expect"] not in line or row["torch"] or row["made"] and not model:
            failures.append(f"{row['typed']}: exit {row['code']}, torch={row['torch']}, made={row['made']}: {lines}")
    assert not failures, "\n".join(failures)
    assert len(rows) >= 50  # every key of the config was tried


def _offline() -> dict:
    import os

    return dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", PYTHONPATH=os.environ.get("PYTHONPATH", ""))


# the commands the issue names, as typed: each was a traceback or an error after the work
COMMANDS = [
    ("evaluate.py", "trainer.devices=0", "error: trainer.devices=0: must be an integer >= 1"),
    ("train.py", "propagation.aggregation=nope", "error: propagation.aggregation=nope: must be a config node"),
    ("train.py", "bias_tests=[]", "error: bias_tests=[]: give a list of one or more bias test names"),
    ("train.py", "trainer.accelerator=tpu", "error: trainer.accelerator=tpu: must be one of cpu, gpu"),
    ("evaluate.py", "trainer.accelerator=mps", "error: trainer.accelerator=mps: no default extraction.batch_size"),
    # a key the composed config lacks (Hydra: "Key 'strategy' is not in struct", 6 lines): the options that have
    # it (conf/trainer/ddp*.yaml, conf/task/wer_disparity.yaml), the entry point that has it, or close matches
    (
        "evaluate.py",
        "trainer.strategy=ddp",
        "error: trainer.strategy=ddp: trainer=cpu has no key strategy; trainer=ddp, trainer=ddp_sim, trainer=ddp_spawn "
        "have it, e.g. trainer=ddp trainer.strategy=ddp",
    ),
    (
        "evaluate.py",
        "max_steps=1",
        "error: max_steps=1: evaluate.py's config has no key max_steps; max_steps is train.py",
    ),
    (
        "evaluate.py",
        "task.normalizer=x",
        "error: task.normalizer=x: task=speat has no key normalizer; task=wer_disparity",
    ),
    ("evaluate.py", "upstream.model_idd=x", "error: upstream.model_idd=x: upstream has no key model_idd; did you mean"),
    ("train.py", "trainer.nope=1", "error: trainer.nope=1: trainer has no key nope; its keys: trainer.accelerator,"),
    # evaluate.py's default task chooses no asr (asr: null); task=wer_disparity's defaults choose one
    ("evaluate.py", "asr.batch_size=2", "error: asr.batch_size=2: no asr is chosen in this config; task=wer_disparity"),
    # a config group the task does not read (its run node interpolates no key of it) would change nothing
    (
        "evaluate.py",
        "task=wer_disparity bias_test=female_male",
        "error: bias_test=female_male: task=wer_disparity "
        "does not read bias_test (it reads asr, corpus, logger, paths)",
    ),
    (
        "evaluate.py",
        "asr=whisper_small",
        "error: asr=whisper_small: task=speat does not read asr (it reads "
        "aggregation, bias_test, extraction, logger, paths, selection, speat, trainer, upstream)",
    ),
    # a node or top-level key the task does not read (no settings group of its own and no value of its run node
    # interpolates it) would change nothing
    (
        "evaluate.py",
        "task=wer_disparity speat.n_permutations=5",
        "error: speat.n_permutations=5: task=wer_disparity does not read speat (it reads asr, corpus, logger, paths)",
    ),
    (
        "evaluate.py",
        "task=spoken_stereoset check_audio=full",
        "error: check_audio=full: task=spoken_stereoset does not read check_audio (it reads logger, paths, sllm)",
    ),
    # a weight-free upstream's own checks (its config class, no torch), not Hydra's instantiation error mid-run
    ("evaluate.py", "upstream=mfcc upstream.n_mfcc=90", "error: upstream=mfcc: n_mfcc=90 must be in 1..n_mels=80"),
    (
        "evaluate.py",
        "upstream=fbank upstream.win_ms=100",
        "error: upstream=fbank: win_ms=100 gives 1600 samples; need 0 < window <= n_fft=512",
    ),
    # an argument of the task object that the entry point builds from a settings group would be overridden silently
    ("evaluate.py", "+task.run.speat={n_permutations:5}", "error: task.run.speat: the task's speat settings are built"),
    # the scale's bounds in their own order, whichever one was typed (ser_data=demo: 0 to 100)
    ("train.py", "ser_data.source.low=200", "error: ser_data.source.low=200, ser_data.source.high=100: the rating"),
    ("train.py", "ser_data.source.high=-5", "error: ser_data.source.low=0, ser_data.source.high=-5: the rating"),
]


@pytest.mark.parametrize("script, override, start", COMMANDS)
def test_the_commands_of_the_issue_end_in_one_line_before_any_folder(tmp_path, script, override, start):
    outputs, cache = tmp_path / "outputs", tmp_path / "cache"
    result = run_entry(
        script,
        *override.split(),
        "logger=none",
        f"paths.output_root={outputs}",
        f"paths.cache_dir={cache}",
        timeout=300,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith(start), result.stderr
    assert not outputs.exists() and not cache.exists()


@pytest.mark.parametrize(
    "covariate, says",
    [
        ("voice_gendr", "no such column of the scored utterance table; did you mean voice_gender?"),
        # the demo manifest's id column: renamed utterance_id in the scored table, and no category
        ("clip_id", "a column of "),
    ],
)
def test_glmm_covariates_are_columns_of_the_scored_table_told_before_any_transcription(tmp_path, covariate, says):
    outputs, cache = tmp_path / "outputs", tmp_path / "cache"
    result = run_entry(
        "evaluate.py",
        "task=wer_disparity",
        f"task.glmm.covariates=[prosody,{covariate}]",
        "logger=none",
        f"paths.output_root={outputs}",
        f"paths.cache_dir={cache}",
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: task.glmm.covariates={covariate}: {says}"), lines
    assert not outputs.exists() and not cache.exists()


def test_glmm_covariates_of_the_corpus_categories_and_the_counts_are_accepted(conf_dir, tmp_path):
    from hydra import compose, initialize_config_dir

    from speechbias.tasks.wer_disparity_checks import check_covariates

    overrides = ["task=wer_disparity", "task.glmm.covariates=[prosody,accent,ref_words]"]
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        check_covariates(compose("evaluate", overrides=overrides))  # the demo corpus's categories, a count


def test_a_sweeps_key_that_its_first_option_lacks_is_one_line_before_any_folder(tmp_path):
    folders = [f"paths.{p}={tmp_path / p}" for p in ("output_root", "cache_dir", "multirun_root")]
    result = run_entry("evaluate.py", "-m", "trainer=gpu,ddp", "trainer.strategy=ddp", "logger=none", *folders)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: trainer.strategy=ddp: trainer=gpu has no key strategy")
    assert not any(tmp_path.iterdir())


def test_the_trainer_names_the_checks_accept_are_lightnings_and_its_device_forms_are_kept():
    from lightning_fabric.accelerators import ACCELERATOR_REGISTRY
    from pytorch_lightning.strategies import StrategyRegistry

    from speechbias.errors import ConfigError
    from speechbias.launch.component_settings import ACCELERATORS, STRATEGIES, TrainerSettings

    # "gpu" and "auto" are Lightning's own aliases, not registry entries
    assert set(ACCELERATORS) <= {*ACCELERATOR_REGISTRY.available_accelerators(), "gpu", "auto"}
    assert set(STRATEGIES) <= {*StrategyRegistry.available_strategies(), "auto"}
    for devices in (-1, "auto", [0, 1], 2):  # all, auto, device indices, a count
        assert TrainerSettings(devices=devices).devices == devices
    for devices in (0, -2, [], True):  # Lightning: "Trainer(devices=0) value is not a valid input"
        with pytest.raises(ConfigError, match=r"^trainer\.devices="):
            TrainerSettings(devices=devices)


def test_the_upstream_names_the_checks_accept_are_the_upstreams_own():
    from speechbias.launch.component_settings import LAYER_CONVENTIONS, UPSTREAM_FAMILIES
    from speechbias.upstream.block_states import LAYER_CONVENTION
    from speechbias.upstream.families import FAMILIES

    assert UPSTREAM_FAMILIES == tuple(FAMILIES)
    assert LAYER_CONVENTIONS == (LAYER_CONVENTION,)
