"""The audio a run reads, as the audio index knows it: each clip's decoded-audio sha256 (the run digest's ``clips``).

A run is reused only when every clip it read decodes to what it decoded to then
(:mod:`speechbias.tasks.run_markers`). The clips are those of the manifests the run's config names: the
bias test's (``bias_test.manifest``), each listed test's of a SpEAT list job (``bias_test=[a,b]``), train.py's
propagation tests (``bias_tests``) and its valence ratings CSV (``ser_data.source.ratings``). Each clip's
sha256 comes from the audio index (:mod:`speechbias.fileio.audio_index`: keyed by resolved path, size,
mtime_ns and ctime_ns, so a rewrite whose mtime is set back still has another identity); the pre-run clip
check has just looked every clip up (or decoded a new or changed one), so this costs a stat per clip
(``benchmarks/clip_identity_bench.py``). A clip the index does not know is decoded here, once.

A process takes a manifest's clips once per state of the manifest file (:data:`_taken`): the pairs of a list
job share their test's, and a check and a digest of one run agree.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.fileio.audio_index import AudioIndex, file_identity

# (manifest identity, root, cache folder) -> {clip path: sha256}: what this process has taken
_taken: dict[tuple, dict[str, str]] = {}


def _value(values: dict[str, str], key: str):
    raw = values.get(key)
    return json.loads(raw) if raw is not None else None


def manifest_sources(cfg: DictConfig | None, values: dict[str, str]) -> list[tuple[Path, Path | None]]:
    """(manifest CSV, folder its relative paths resolve against or None: the CSV's) of every clip table
    the run reads, from its config values (and, for a list job or train.py's tests, its config)."""
    sources: list[tuple[Path, Path | None]] = []
    entries = _value(values, "task.run.bias_tests.entries")
    if isinstance(cfg, DictConfig) and isinstance(entries, list) and entries:
        from speechbias.tasks.speat_checks import listed_bias_tests

        nodes = [node for _key, node in listed_bias_tests(cfg)]
    else:
        nodes = []
    if isinstance(cfg, DictConfig) and isinstance(_value(values, "bias_tests"), list):
        from speechbias.errors import ConfigError
        from speechbias.tasks.train_ser_checks import propagation_test_nodes

        try:
            nodes += [node for _entry, node in propagation_test_nodes(cfg)]
        except ConfigError:  # the run's checks refuse it first
            pass
    for node in nodes:
        manifest = OmegaConf.select(node, "manifest", default=None)
        if isinstance(manifest, str):
            root = OmegaConf.select(node, "root", default=None)
            sources.append((Path(manifest).expanduser(), Path(str(root)) if root else None))
    if not nodes and isinstance(_value(values, "bias_test.manifest"), str):
        root = _value(values, "bias_test.root")
        sources.append((Path(_value(values, "bias_test.manifest")).expanduser(), Path(root) if root else None))
    ratings = _value(values, "ser_data.source.ratings")
    if isinstance(ratings, str):
        sources.append((Path(ratings).expanduser(), None))
    return sources


def clip_paths(manifest: Path, root: Path | None = None) -> list[str]:
    """The absolute clip paths of a manifest (or ratings) CSV's ``path`` column, stripped as the run reads
    them, relative ones against ``root`` or the CSV's folder; [] when it has none (the run's own checks
    name a bad file). Also the clips of the pre-run storage estimate (:mod:`speechbias.launch.storage_check`)."""
    try:
        with open(manifest, newline="", encoding="utf-8") as f:
            rows = [r.get("path") for r in csv.DictReader(f)]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
    base = root if root is not None else manifest.parent
    return [str(p if (p := Path(r.strip())).is_absolute() else base / p) for r in rows if r and r.strip()]


def run_clips(cfg: DictConfig | None, values: dict[str, str], cache_dir: str | Path | None) -> dict[str, str]:
    """``{clip path: sha256 of its decoded audio}`` of every clip the run reads (a clip that cannot be
    decoded: ``"unusable: <why>"``), through the audio index under ``cache_dir``."""
    index = AudioIndex(cache_dir)
    clips: dict[str, str] = {}
    for manifest, root in manifest_sources(cfg, values):
        try:
            key = (tuple(file_identity(manifest).values()), str(root), str(cache_dir))
        except OSError:
            continue  # not built yet (a corpus-built test): its clips are taken once it is
        if key not in _taken:
            facts = index.facts(clip_paths(manifest, root))
            _taken[key] = {p: f.sha256 if not isinstance(f, str) else f"unusable: {f}" for p, f in facts.items()}
        clips.update(_taken[key])
    return clips
