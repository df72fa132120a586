"""The one list of config keys that do not change a run's results, and the lists derived from it.

:data:`RESULT_NEUTRAL_KEYS` (a key covers everything below it): where outputs go, the logger, progress
display, rerun switches, parallelism and batching (the upstream contract makes states batch-invariant).
Three users read it:

- the run digest (:mod:`speechbias.tasks.run_markers`) leaves these keys, and the task node's own
  copies of them (:data:`TASK_NODE_NEUTRAL_KEYS`), out of what identifies a run's results;
- job folder names (``conf/sweep/folders.yaml``: ``exclude_keys: ${speechbias.folder_name_excluded_keys:}``,
  the resolver :mod:`speechbias.run_context` registers) leave out :func:`folder_name_excluded_keys`: the
  neutral keys as typed on a command line, plus ``experiment``/``task`` and ``paths.data_root``;
- a sweep's pre-flight (:mod:`speechbias.launch.sweep_preflight`) composes once the points that differ only
  in :func:`no_input_keys`: settings that name no input (aggregation, statistics, seed) and the neutral keys
  other than folders.
"""

from __future__ import annotations

RESULT_NEUTRAL_KEYS = (
    "hydra",
    "logger",
    "force",
    "check_audio",  # how the clips are checked before the run, not what it computes
    "allow_duplicate_audio",  # a manifest's repeats are refused or warned about; the run is the same
    "sweep",
    "trainer",
    "torch_threads",
    "fit_threads",
    "task.run_dir",
    "task.progress",
    "paths.root_dir",
    "paths.output_dir",
    "paths.output_root",
    "paths.multirun_root",
    "paths.cache_dir",
    "paths.demo_dir",
    "extraction.batch_size",
    "extraction.num_workers",
    "extraction.max_clip_seconds",  # a run it refuses has no results; one it lets through computes the same
    "extraction.memory_gib",  # the same: it only moves the auto clip limit
)
# keys below a neutral key that do change the results: the trainer's numeric precision (the SER heads
# train in it; bf16 is not float32), unlike its devices, strategy and progress display
RESULT_KEYS_UNDER_NEUTRAL = ("trainer.precision",)

# the task object's arguments (``task.run.*``) that only say where to write and what to show: copies of
# neutral keys under the names the task's constructor gives them (its settings groups are no such copies:
# the entry point builds them from their own keys, which the run node does not name)
TASK_NODE_NEUTRAL_KEYS = (
    "task.run.writer",
    "task.run.tracker",
    "task.run.cache",
    "task.run.clip_check",  # check_audio, allow_duplicate_audio, paths.cache_dir: a built manifest's clip check
    "task.run.trainer",
    "task.run.progress",
    "task.run.force",
    "task.run.demo_dir",
)

# Hydra leaves a key out of a folder name only when it matches exactly: the sub-keys of neutral groups
# that a command line sets one by one
NEUTRAL_SUBKEYS_TYPED = (
    "logger.kind",
    "logger.mode",
    "logger.project",
    "logger.entity",
    "logger.group",
    "logger.tags",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.strategy",
)
# out of folder names although they do change results: an experiment or task names no setting of its own
# (its settings are the folder's other keys), and data_root moves with the machine, not the stimuli's identity
# (the manifest's sha256 in the digest tells two data roots apart)
FOLDER_NAME_ALSO_EXCLUDED = ("experiment", "task", "paths.data_root")
# settings that change results but name no input (no model, corpus, manifest or folder)
NO_INPUT_SETTINGS = ("aggregation", "seed", "speat", "lr", "extraction")
# keys never typed on a command line (set by the entry configs themselves)
NOT_TYPED = ("hydra", "sweep", "task.run_dir", "task.progress", "paths.output_dir", "paths.demo_dir")


def digest_excluded_keys() -> tuple[str, ...]:
    """Keys (and what is below them) the run digest leaves out."""
    return RESULT_NEUTRAL_KEYS + TASK_NODE_NEUTRAL_KEYS


def digest_included_keys() -> tuple[str, ...]:
    """Keys below an excluded one that the digest keeps."""
    return RESULT_KEYS_UNDER_NEUTRAL + tuple(f"task.run.{k}" for k in RESULT_KEYS_UNDER_NEUTRAL)


def folder_name_excluded_keys() -> list[str]:
    """Override keys left out of a sweep's job folder names (Hydra's ``override_dirname.exclude_keys``)."""
    typed = [k for k in RESULT_NEUTRAL_KEYS if k not in NOT_TYPED]
    return list(dict.fromkeys([*FOLDER_NAME_ALSO_EXCLUDED[:2], *typed, *NEUTRAL_SUBKEYS_TYPED, "paths.data_root"]))


def no_input_keys() -> tuple[str, ...]:
    """Override keys (and what is below them) that name no input: a sweep's pre-flight ignores them. The
    neutral ``paths.*`` keys stay: they name folders the checks look at (a writable cache folder)."""
    return NO_INPUT_SETTINGS + tuple(k for k in RESULT_NEUTRAL_KEYS if not k.startswith("paths."))
