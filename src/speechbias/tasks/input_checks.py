"""Checks of a task's inputs shared by several tasks, made before any model loads (no torch).

A bias test's manifest (every clip it lists exists and decodes, at least :data:`MIN_CLIPS_PER_ROLE` clips
per role) or, for a corpus-built test not built yet, its corpus folders; a folder the run writes to.
Each raises :class:`~speechbias.errors.ConfigError`: one line naming the key, the value and the fix.
Standard library and OmegaConf at import; soundfile/numpy only to decode a manifest's clips and the
stimulus registry only for a corpus-built test whose manifest is not built yet.
"""

from __future__ import annotations

import csv
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError

MAX_LISTED = 3

# SpEAT's effect size needs a standard deviation within each role (targets X, Y; attributes A, B)
MIN_CLIPS_PER_ROLE = 2

CORPUS_LAYOUT = "experiments/speat_2023/README.md"

# folder of the cache that records manifests whose clips all decoded (check_manifest_clips)
CLIP_CHECKS = "clip_checks"


def check_cache_folder(cfg: DictConfig) -> None:
    """``paths.cache_dir`` takes a new file (made if missing)."""
    check_writable_folder(OmegaConf.select(cfg, "paths.cache_dir", default=None), "paths.cache_dir")


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


def check_bias_test(node: DictConfig, key: str, cache_dir=None) -> None:
    """The bias test's manifest exists and every clip it lists exists and decodes, with at least
    :data:`MIN_CLIPS_PER_ROLE` clips per role; or a builder will write it from corpus folders that exist."""
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
    check_manifest_files(path, root, f"{key}.manifest")
    check_role_sizes(path, f"{key}.manifest")
    check_manifest_clips(path, root, f"{key}.manifest", Path(str(cache_dir)) / CLIP_CHECKS if cache_dir else None)


def _manifest_rows(path: Path, key: str) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{key}={path}: not a readable CSV ({exc})") from exc


def check_manifest_files(path: Path, root: Path, key: str = "manifest") -> None:
    """Every row's ``path`` (relative ones against ``root``) is an existing file; names the rows."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if "path" not in (reader.fieldnames or []):
                raise ConfigError(
                    f"{key}={path}: no 'path' column (has {reader.fieldnames}); a manifest needs "
                    "columns clip_id, path, role"
                )
            missing = [
                (i, row["path"])
                for i, row in enumerate(reader, start=2)
                if not (root / (row["path"] or "").strip()).is_file()
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{key}={path}: not a readable CSV ({exc})") from exc
    if missing:
        rows = ", ".join(str(i) for i, _ in missing[:MAX_LISTED]) + (" ..." if len(missing) > MAX_LISTED else "")
        raise ConfigError(
            f"{key}={path}: {len(missing)} audio file(s) not found, e.g. {missing[0][1]} "
            f"(row(s) {rows}); fix the path column or the files"
        )


def check_role_sizes(path: Path, key: str = "manifest") -> None:
    """At least :data:`MIN_CLIPS_PER_ROLE` clips of each role X, Y, A, B (SpEAT's effect size divides by
    a standard deviation over each role's clips)."""
    from speechbias.roles import ROLES

    counts = {role: 0 for role in ROLES}
    for row in _manifest_rows(path, key):
        role = (row.get("role") or "").strip()
        if role in counts:
            counts[role] += 1
    small = [f"{role}: {n}" for role, n in counts.items() if n < MIN_CLIPS_PER_ROLE]
    if small:
        raise ConfigError(
            f"{key}={path}: too few clips per role ({', '.join(small)}); a bias test needs at least "
            f"{MIN_CLIPS_PER_ROLE} clips of each role {'/'.join(ROLES)}; add clips to the manifest"
        )


# clips already decoded by this process: (path, size, mtime_ns) -> problem or None (the entry points check
# a single run's config twice: before its folder is made and when it starts)
_CLIP_VERDICTS: dict[tuple[str, int, int], str | None] = {}


def _clip_problem(path: Path) -> str | None:
    """Why the clip at ``path`` cannot be used (audio.load_audio's reason), or None."""
    from speechbias.fileio.audio import AudioError, load_audio

    try:
        stat = path.stat()
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _CLIP_VERDICTS:
        try:
            load_audio(path)
            _CLIP_VERDICTS[key] = None
        except AudioError as exc:
            _CLIP_VERDICTS[key] = exc.problem
    return _CLIP_VERDICTS[key]


def _short(problem: str, limit: int = 110) -> str:
    """A clip's problem for a list: cut before a parenthesised detail when it is long."""
    if len(problem) <= limit:
        return problem
    cut = problem.rfind(" (", 0, limit)
    return problem[:cut] if cut > 20 else problem[:limit] + "..."


def _clips_checked_marker(clips: list[Path], verdict_dir: Path) -> Path:
    """The file that records that these clips, with these sizes and mtimes, all passed the check."""
    import hashlib
    import json

    stats = []
    for clip in clips:
        try:
            st = clip.stat()
            stats.append([str(clip), st.st_size, st.st_mtime_ns])
        except OSError:
            stats.append([str(clip), None, None])
    return verdict_dir / (hashlib.sha256(json.dumps(stats).encode()).hexdigest() + ".ok")


def check_manifest_clips(path: Path, root: Path, key: str = "manifest", verdict_dir: Path | None = None) -> None:
    """Every clip of the manifest decodes as a stimulus (readable, not truncated, not empty, silent or
    NaN; :func:`speechbias.fileio.audio.load_audio`'s checks), so bad files are found before any model loads,
    all in one error: their count and the first few with their reasons.

    ``verdict_dir`` (the cache's ``clip_checks/``): a manifest whose clips all passed with the same sizes
    and mtimes is not decoded again, so the jobs of a sweep over one test decode its clips once.
    """
    from concurrent.futures import ThreadPoolExecutor

    clips = [root / (row.get("path") or "").strip() for row in _manifest_rows(path, key)]
    marker = _clips_checked_marker(clips, verdict_dir) if verdict_dir is not None else None
    if marker is not None and marker.is_file():
        return
    with ThreadPoolExecutor(max_workers=4) as pool:  # decoding releases the GIL
        problems = [(clip, problem) for clip, problem in zip(clips, pool.map(_clip_problem, clips)) if problem]
    if problems:
        shown = "; ".join(f"{clip}: {_short(problem)}" for clip, problem in problems[:MAX_LISTED])
        more = f"; ... ({len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise ConfigError(
            f"{key}={path}: {len(problems)} of {len(clips)} clips cannot be used: {shown}{more}; "
            "fix or replace those files, or drop their rows"
        )
    if marker is not None:
        from speechbias.fileio.atomic_file import atomic_write

        try:
            atomic_write(marker, lambda tmp: tmp.write_text(str(path)))
        except OSError:  # only a shortcut for the next run
            pass


def check_corpus_folders(node: DictConfig, key: str) -> None:
    """A corpus-built test (manifest not built yet): ``paths.data_root`` and the folders of the corpora its
    recipe reads exist (and ``paper_lists_dir`` for ``selection=paper``)."""
    builder = node.builder
    test = str(OmegaConf.select(builder, "test", default="") or "")
    data_root = OmegaConf.select(builder, "data_root", default=None)
    from speechbias.stimuli.registry import RECIPES
    from speechbias.stimuli.selection.sources import CORPUS_DIRS

    recipe = RECIPES.get(test)
    if recipe is None:
        return  # the builder names its own error
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
