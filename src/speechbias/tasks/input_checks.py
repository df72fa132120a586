"""Checks of a task's inputs shared by several tasks, made before any model loads (no torch).

A bias test's manifest (every clip it lists exists and decodes, at least :data:`MIN_CLIPS_PER_ROLE` clips
per role, no audio repeated; speechbias.stimuli.manifest, through the audio index: an unchanged clip is not
decoded again) or, for a corpus-built test not built yet, its corpus folders; a folder the run writes to.
(The values of settings are checked before these, by their settings classes: speechbias.checked_settings.)
Each raises :class:`~speechbias.errors.ConfigError`: one line naming the key, the value and the fix.
Standard library and OmegaConf at import; soundfile/numpy only to decode a manifest's clips and the
stimulus registry only for a corpus-built test whose manifest is not built yet.
"""

from __future__ import annotations

import csv
import difflib
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError

# SpEAT's effect size needs a standard deviation within each role (targets X, Y; attributes A, B)
MIN_CLIPS_PER_ROLE = 2

CORPUS_LAYOUT = "experiments/speat_2023/README.md"


def check_cache_folder(cfg: DictConfig) -> None:
    """``paths.cache_dir`` takes a new file (not made here: its first write makes it, so a check that fails
    leaves no folder)."""
    check_writable_folder(OmegaConf.select(cfg, "paths.cache_dir", default=None), "paths.cache_dir", create=False)


def check_writable_folder(folder, key: str, create: bool = True, fix: str | None = None) -> None:
    """``folder`` takes a new file (``create``: made if missing; else its nearest existing parent must
    take one); else one line naming it and the reason (read-only, disk full, not a folder, ...)."""
    if not folder:
        return
    import tempfile

    path = Path(str(folder)).expanduser()
    probe = path
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        else:
            while not probe.exists() and probe.parent != probe:
                probe = probe.parent
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = "" if probe == path else f" (in {probe})"
        raise ConfigError(
            f"{key}={folder}: cannot write there{where} ({reason}); "
            f"{fix or f'give a writable folder, e.g. {key}=/tmp/speechbias'}"
        ) from exc


def csv_header(path: Path, typed: str, fix: str, sep: str = ",") -> list[str]:
    """The column names on the first line of a CSV (TSV: ``sep``) file, a UTF-8 byte-order mark skipped (as
    pandas skips it where the file is read later); a file that cannot be read is one
    :class:`~speechbias.errors.ConfigError`: ``<typed>: cannot be read (<reason>); <fix>``."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f, delimiter=sep), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(f"{typed}: cannot be read ({reason}); {fix}") from None


def check_bias_test(node: DictConfig, key: str, cfg: DictConfig) -> None:
    """The bias test's manifest exists and every clip it lists exists and decodes, with at least
    :data:`MIN_CLIPS_PER_ROLE` clips per role and no audio repeated (the run config ``cfg``'s ``check_audio``,
    ``allow_duplicate_audio``, clip length limit and ``paths.cache_dir``'s audio index apply); or a builder
    will write it from corpus folders that exist (the clips of what it builds are checked then, with the same
    settings: BiasTest.load's ClipCheck)."""
    manifest = OmegaConf.select(node, "manifest", default=None)
    has_builder = OmegaConf.select(node, "builder", default=None) is not None
    if manifest is None:
        return
    path = Path(str(manifest)).expanduser()
    if not path.is_file():
        if has_builder:
            check_corpus_folders(node, key)
            return
        raise ConfigError(
            f"{key}.manifest={manifest}: no such file and no builder configured; give an existing "
            "manifest CSV (columns clip_id, path, role)"
        )
    root = OmegaConf.select(node, "root", default=None)
    root = Path(str(root)) if root else path.parent
    from speechbias.stimuli.manifest import (
        ManifestError,
        check_manifest_audio,
        check_resampling_ids,
        manifest_columns,
        read_manifest_rows,
    )

    try:
        table = read_manifest_rows(path, root=root, required_roles=())
        check_role_sizes(table, path, f"{key}.manifest")
        if OmegaConf.select(cfg, "speat.se_curve", default=False):
            design = OmegaConf.select(node, "resampling", default=None)
            check_resampling_ids(manifest_columns(table), design, str(path))
        full = OmegaConf.select(cfg, "check_audio", default="changed") == "full"
        repeats = bool(OmegaConf.select(cfg, "allow_duplicate_audio", default=False))
        from speechbias.features.clip_memory import clip_length_limit

        max_seconds, limit_text = clip_length_limit(cfg)
        check_manifest_audio(
            table,
            str(path),
            OmegaConf.select(cfg, "paths.cache_dir", default=None),
            full=full,
            allow_repeats=repeats,
            max_seconds=max_seconds,
            limit_text=limit_text,
        )
    except ManifestError as exc:
        raise ConfigError(f"{key}.manifest={exc}") from exc


def check_role_sizes(rows: list[dict], path: Path, key: str = "manifest") -> None:
    """At least :data:`MIN_CLIPS_PER_ROLE` clips of each role X, Y, A, B among the manifest's ``rows``
    (:func:`~speechbias.stimuli.manifest.read_manifest_rows`; SpEAT's effect size divides by a standard
    deviation over each role's clips)."""
    from speechbias.roles import ROLES

    counts = {role: 0 for role in ROLES}
    for row in rows:
        if row["role"] in counts:
            counts[row["role"]] += 1
    small = [f"{role}: {n}" for role, n in counts.items() if n < MIN_CLIPS_PER_ROLE]
    if small:
        raise ConfigError(
            f"{key}={path}: too few clips per role ({', '.join(small)}); a bias test needs at least "
            f"{MIN_CLIPS_PER_ROLE} clips of each role {'/'.join(ROLES)}; add clips to the manifest"
        )


def check_corpus_folders(node: DictConfig, key: str) -> None:
    """A corpus-built test (manifest not built yet): ``paths.data_root`` and the folders of the corpora its
    recipe reads exist (and ``paper_lists_dir`` for ``selection=paper``)."""
    builder = node.builder
    test = str(OmegaConf.select(builder, "test", default="") or "")
    data_root = OmegaConf.select(builder, "data_root", default=None)
    from speechbias.stimuli.registry import RECIPES
    from speechbias.stimuli.selection.sources import CORPUS_DIRS

    recipe = RECIPES.get(test)
    if recipe is None and not test:
        return  # a builder of its own (no recipe): it names its own error
    if recipe is None:
        close = difflib.get_close_matches(test, list(RECIPES), 2)
        hint = f"did you mean {' or '.join(close)}?" if close else f"the paper's tests: {', '.join(sorted(RECIPES))}"
        raise ConfigError(f"{key}.builder.test={test}: not a SpEAT paper test; {hint}")
    if OmegaConf.select(builder, "selection", default="ours") == "paper":
        lists = OmegaConf.select(builder, "paper_lists_dir", default=None)
        if lists and not Path(str(lists)).expanduser().is_dir():
            raise ConfigError(
                f"{key}.builder.paper_lists_dir={lists}: no such folder; give the SpEAT authors' "
                "data/ folder (selection.paper_lists_dir=...)"
            )
    overrides = OmegaConf.to_container(builder.corpus_dirs) if builder.get("corpus_dirs") else {}
    dirs = {**CORPUS_DIRS, **(overrides or {})}
    corpora = list(dict.fromkeys([*recipe.corpora, recipe.attributes.corpus]))
    root = Path(str(data_root)).expanduser() if data_root else None
    folders = [(c, Path(dirs[c]) if Path(dirs[c]).is_absolute() or root is None else root / dirs[c]) for c in corpora]
    missing = [f"{folder} ({corpus})" for corpus, folder in folders if not folder.is_dir()]
    if not missing:
        return
    fix = f"set paths.data_root=... (or SPEECHBIAS_DATA) to the folder that holds them; layout: {CORPUS_LAYOUT}"
    if root is not None and not root.is_dir():
        raise ConfigError(
            f"paths.data_root={data_root}: no such folder; {key}={test} builds its stimuli from "
            f"{', '.join(dirs[c] for c in corpora)} there; {fix}"
        )
    raise ConfigError(f"{key}={test}: corpus folder(s) not found: {', '.join(missing)}; {fix}")
