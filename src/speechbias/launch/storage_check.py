"""Before a run starts: will what it writes fit? And which setting moves each folder it writes to.

:class:`StorageCheckCallback` (``hydra.callbacks.storage_check`` of the entry configs) runs before Hydra
makes the run's folder and saves its config there (``.hydra/``, which no code of ours can catch): it
measures the free space of the run folder's and the feature cache's file systems against an estimate of
what the run will write (:func:`estimate_writes`) and refuses with one line naming the folder, the
sizes and the setting to change, exit 1. ``hydra.callbacks.storage_check.enabled=false`` skips the
estimate (the folder must still hold Hydra's own config save).

:func:`register_run_folders` tells :mod:`speechbias.fileio.atomic_file` which setting moves the run folder
and the cache, so any write that fails later (space, quota, permission) names that setting.

Standard library, OmegaConf and Hydra at import; never torch (the estimate reads CSV files, the audio
index and the model's sizes: :mod:`speechbias.upstream.architecture`).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from speechbias.errors import StorageError, user_error_ends_command
from speechbias.fileio.atomic_file import register_storage_setting

RUN_FOLDER_SETTING = "hydra.run.dir=... or paths.output_root=..."
SWEEP_FOLDER_SETTING = "hydra.sweep.dir=... or paths.multirun_root=..."
CACHE_SETTING = "paths.cache_dir=... or SPEECHBIAS_CACHE"
SKIP_SETTING = "hydra.callbacks.storage_check.enabled=false"

# what a run writes besides its cache entries and checkpoints (measured on the demo runs, rounded up):
# Hydra's config save and job log, config.yaml, job_status.json, the run digest, W&B's offline files
# (~120 KiB) and the results (SpEAT ~10 KiB; train.py's tables and three figures ~300 KiB)
RUN_FILES_BYTES = {"speat": 256 << 10, "train_ser": 2 << 20}
OTHER_TASK_FILES_BYTES = 4 << 20
# an audio index record (~330 bytes, one file)
AUDIO_INDEX_RECORD_BYTES = 512
# a cache entry's safetensors header and metadata besides its values (fbank: 1,424 bytes for 960 of values)
ENTRY_OVERHEAD_BYTES = 512
HEAD_HIDDEN = 256  # the valence head's Linear(D, 256)
CHECKPOINT_OVERHEAD_BYTES = 64 << 10


@dataclass
class Need:
    """Bytes a run will write into one folder, what they are, and the setting that moves the folder."""

    folder: Path
    setting: str
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())


def register_run_folders(cfg: DictConfig, output_dir: str | Path, multirun: bool = False) -> None:
    """A failed write into the run folder names ``hydra.run.dir``/``paths.output_root`` (a sweep's job:
    ``hydra.sweep.dir``/``paths.multirun_root``), one into the cache ``paths.cache_dir``; a log file on a
    full disk drops its records silently (``logging.raiseExceptions = False``)."""
    register_storage_setting(output_dir, SWEEP_FOLDER_SETTING if multirun else RUN_FOLDER_SETTING)
    # a log handler whose file is on a full disk drops the record (logging's documented production setting)
    # instead of printing a traceback per record: the write that failed says it in one line
    logging.raiseExceptions = False
    cache = OmegaConf.select(cfg, "paths.cache_dir", default=None)
    if cache:
        register_storage_setting(str(cache), CACHE_SETTING)


def _round_up(size: int, block: int) -> int:
    return int(math.ceil(size / block) * block) if size > 0 else 0


def existing_folder(folder: Path) -> Path:
    """``folder`` or its nearest existing parent (where a new folder would be made)."""
    folder = Path(folder).expanduser().absolute()
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def upstream_shape(upstream) -> tuple[int, int]:
    """(layers, features per layer) of the upstream config (:func:`speechbias.upstream.architecture.architecture_of`:
    fbank/mfcc from their settings, an inline model from its config, a hub model from its ``config.json`` in a
    local folder or the local Hugging Face cache or the shipped models' figures; else the largest paper model)."""
    from speechbias.upstream.architecture import architecture_of

    arch = architecture_of(upstream)
    return arch.states, arch.width


# the keys whose value names a table of clips
TABLE_KEYS = ("manifest", "ratings")


def _manifest_clips(cfg: DictConfig) -> set[Path]:
    """The audio files of the CSV tables the config names (any ``*manifest`` or ``*ratings`` value that is
    an existing ``.csv`` with a ``path`` column; relative paths from the table's folder: :func:`clip_paths`).

    Only those values are resolved: the config is walked by its keys, and an interpolated value under any
    other key is not followed (``task.run.bias_test: ${bias_test}`` repeats a node walked where it is);
    resolving every value of the config (its resolvers, and the grammar's first parse of each kind of
    interpolation) was most of the estimate's cost."""
    tables: list[Path] = []

    def walk(node) -> None:
        for key in list(node.keys()) if isinstance(node, DictConfig) else []:
            names_table = str(key).endswith(TABLE_KEYS)
            if str(key) == "hydra" or (not names_table and OmegaConf.is_interpolation(node, key)):
                continue
            try:
                value = node[key]
            except Exception:  # noqa: BLE001 - a value only a running app can resolve: not a table
                continue
            if isinstance(value, DictConfig):
                walk(value)
            elif isinstance(value, str) and names_table and value.endswith(".csv"):
                tables.append(Path(value).expanduser())

    walk(cfg)
    from speechbias.tasks.clip_identity import clip_paths

    return {Path(clip) for table in tables for clip in clip_paths(table)}


def uncached_clips(cfg: DictConfig, clips: set[Path]) -> tuple[int, int]:
    """(clips without a cache entry, clips the audio index does not know). The entry is looked up under the
    upstream's own fingerprint where its config gives it (fbank, mfcc, an HF model whose files are at hand);
    for a model whose fingerprint needs it built, a clip counts as cached when any model's entry of its audio exists (a lower bound)."""
    cache_dir = OmegaConf.select(cfg, "paths.cache_dir", default=None)
    if not cache_dir or not clips:
        return len(clips), len(clips)
    from speechbias.features.cache import FeatureCache

    cache = FeatureCache(str(cache_dir))
    try:  # the upstream's cache namespace when its config and files give it without building it (no torch)
        from speechbias.upstream.deferred import DeferredUpstream

        fingerprint = DeferredUpstream(OmegaConf.select(cfg, "upstream", default=None)).fingerprint_without_build()
    except Exception:  # noqa: BLE001 - arguments the upstream refuses: the run itself says why
        fingerprint = None
    missing = unknown = 0
    for clip in clips:
        record = cache.lookup_audio(clip) if clip.is_file() else None
        if record is None:
            unknown += 1
            missing += 1
        elif not (
            cache.entry_path(fingerprint, record[0]).is_file()
            if fingerprint
            else cache.has_entry_for_any_upstream(record[0])
        ):
            missing += 1
    return missing, unknown


def estimate_writes(cfg: DictConfig, run_dir: str | Path) -> list[Need]:
    """What the run of ``cfg`` will write, per folder: the run folder (:func:`run_folder_need`) and the
    feature cache (:func:`cache_need` of the clips its tables name)."""
    needs = [run_folder_need(cfg, run_dir)]
    cache = cache_need(cfg, _manifest_clips(cfg))
    return needs + ([cache] if cache is not None else [])


def run_folder_need(cfg: DictConfig, run_dir: str | Path, setting: str = RUN_FOLDER_SETTING) -> Need:
    """The run folder's files; train.py's checkpoints (``last.ckpt`` and the best, with Adam's two moments
    per parameter), rounded up to the file system's block."""
    task = str(OmegaConf.select(cfg, "task.name", default=""))
    run_parts = {"run files": RUN_FILES_BYTES.get(task, OTHER_TASK_FILES_BYTES)}
    if task == "train_ser":
        layers, width = upstream_shape(OmegaConf.select(cfg, "upstream", default=None))
        run_block = os.statvfs(existing_folder(Path(run_dir))).f_frsize
        lrs = OmegaConf.select(cfg, "lr", default=1e-4)
        heads = len(lrs) if OmegaConf.is_list(lrs) else 1
        parameters = heads * (layers + width * HEAD_HIDDEN + 2 * HEAD_HIDDEN + 1)
        run_parts["checkpoints"] = 2 * _round_up(3 * 4 * parameters + CHECKPOINT_OVERHEAD_BYTES, run_block)
    return Need(Path(str(run_dir)), setting, run_parts)


def cache_need(cfg: DictConfig, clips: set[Path]) -> Need | None:
    """The feature cache's share of a run of ``cfg`` over ``clips``: one entry per clip not cached yet (3
    statistics x layers x features float32) and an audio index record per clip not indexed, rounded up
    to the file system's block; None for a task that writes no cache entry or a config without a cache."""
    task = str(OmegaConf.select(cfg, "task.name", default=""))
    cache = OmegaConf.select(cfg, "paths.cache_dir", default=None)
    if not cache or task not in ("speat", "train_ser"):
        return None
    layers, width = upstream_shape(OmegaConf.select(cfg, "upstream", default=None))
    missing, unknown = uncached_clips(cfg, clips)
    block = os.statvfs(existing_folder(Path(str(cache)))).f_frsize
    entry = _round_up(3 * 4 * layers * width + ENTRY_OVERHEAD_BYTES, block)
    parts = {
        f"{missing} cache entries of {entry >> 10} KiB": missing * entry,
        f"{unknown} audio index records": unknown * _round_up(AUDIO_INDEX_RECORD_BYTES, block),
    }
    return Need(Path(str(cache)), CACHE_SETTING, parts)


def sweep_needs(jobs: list[tuple[DictConfig, int]], sweep_dir: str | Path) -> list[Need]:
    """What a sweep will write, per folder, from ``(job config, number of jobs alike)`` per distinct point:
    every job's run folder (under ``sweep_dir``) and, per distinct upstream and cache, one entry per clip
    that any of its jobs reads and the cache lacks (jobs that share an upstream share their clips' entries)."""
    run_parts: dict[str, int] = {}
    n_jobs = 0
    clips_of: dict[tuple[str, str], tuple[DictConfig, set[Path]]] = {}
    for cfg, count in jobs:
        n_jobs += count
        for name, size in run_folder_need(cfg, sweep_dir, SWEEP_FOLDER_SETTING).parts.items():
            run_parts[name] = run_parts.get(name, 0) + count * size
        key = (
            OmegaConf.to_yaml(OmegaConf.select(cfg, "upstream", default=None) or {}),
            str(OmegaConf.select(cfg, "paths.cache_dir", default="")),
        )
        clips_of.setdefault(key, (cfg, set()))[1].update(_manifest_clips(cfg))
    run_folder = {f"{name} of {n_jobs} jobs": size for name, size in run_parts.items()}
    needs = [Need(Path(str(sweep_dir)), SWEEP_FOLDER_SETTING, run_folder)]
    for cfg, clips in clips_of.values():
        need = cache_need(cfg, clips)
        if need is not None:
            needs.append(need)
    return needs


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def check_free_space(needs: list[Need], skippable: bool = True, what: str = "this run") -> None:
    """Raise :class:`StorageError` (one line) when a file system cannot take what ``what`` (this run, this
    sweep) will write there (needs in one file system are added up); ``skippable``: the line names the
    setting that skips it."""
    by_fs: dict[int, list[Need]] = {}
    for need in needs:
        by_fs.setdefault(os.stat(existing_folder(need.folder)).st_dev, []).append(need)
    for group in by_fs.values():
        folder = existing_folder(group[0].folder)
        fs = os.statvfs(folder)
        free = fs.f_bavail * fs.f_frsize
        total = sum(n.total for n in group)
        if free >= total:
            continue
        parts = ", ".join(f"{name}: {_size(b)}" for n in group for name, b in n.parts.items() if b)
        settings = " / ".join(dict.fromkeys(n.setting for n in group))
        raise StorageError(
            f"{group[0].folder}: {_size(free)} free on its disk ({folder}), {what} will write about "
            f"{_size(total)} there ({parts}); free space or point the run at another folder ({settings})"
            + (f", or skip this check with {SKIP_SETTING}" if skippable else "")
        )


def hydra_save_need(config: DictConfig, run_dir: Path) -> Need:
    """What Hydra writes into the run folder before the run starts (``.hydra/``: config.yaml, hydra.yaml,
    overrides.yaml) and the job log's first lines."""
    block = os.statvfs(existing_folder(run_dir)).f_frsize
    text = len(OmegaConf.to_yaml(config, resolve=False).encode())
    # config.yaml + hydra.yaml hold the YAML's two parts; overrides.yaml and the job log's first lines
    return Need(run_dir, RUN_FOLDER_SETTING, {"Hydra's config save": _round_up(text, block) + 3 * block})


class StorageCheckCallback(Callback):
    """Hydra callback: before a single run's folder is made, will the run's files fit (see the module
    docstring)? ``enabled=false`` checks only room for Hydra's own config save."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        with user_error_ends_command():
            run_dir = Path(str(OmegaConf.select(config, "hydra.run.dir")))
            needs = [hydra_save_need(config, run_dir)]
            if self.enabled:
                needs += estimate_writes(config, run_dir)
            check_free_space(needs, skippable=self.enabled)
