"""The stimulus manifest: one row per clip, validated on load.

Schema (CSV, one header row):

=========  ==========================================================================
clip_id    unique string id of the clip within the manifest
path       audio file; relative paths are resolved against ``root`` (default: the
           manifest's own folder)
role       one of X, Y (target groups) or A, B (attribute poles: pleasant, unpleasant)
group      human-readable group label, e.g. "female", "male", "pleasant"
speaker    speaker id (used by speaker-level resampling and matching)
pair_id    id shared by matched clips across X and Y ("" when unmatched)
stratum    resampling stratum such as "female|young" ("" when not stratified)
=========  ==========================================================================

Any further columns are free metadata and are kept as they are. Column names and roles are exact
(case-sensitive): a ``Role`` column or a role ``x`` is named in the error with the spelling to use.

:func:`validate_manifest` (a DataFrame) and :func:`read_manifest_rows` (the CSV's rows as dicts, without
pandas: the pre-run check imports no pandas) check the table (one line naming every missing column, the rows of bad roles,
files not found and, for relative paths, the folder they were resolved against).
:func:`check_manifest_audio` checks the clips themselves, through the audio index
(:mod:`speechbias.fileio.audio_index`: an unchanged file is not decoded again): every clip decodes, and
no audio is listed twice (the same file, or the same decoded audio, in two rows): repeated clips are not
independent observations, so SpEAT's permutation p-value and standard error would be wrong.
"""

from __future__ import annotations

import csv
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.audio_index import AudioFacts, AudioIndex
from speechbias.roles import ROLES

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

MANIFEST_COLUMNS = ("clip_id", "path", "role", "group", "speaker", "pair_id", "stratum")
REQUIRED_COLUMNS = ("clip_id", "path", "role")
_OPTIONAL_DEFAULTS = {"group": "", "speaker": "", "pair_id": "", "stratum": ""}
# what the roles mean, for error lines
ROLE_MEANINGS = "X, Y: the target groups; A, B: the attribute poles, pleasant and unpleasant"
# bad clips / repeated clips named in one error line, and the rows of each repeated clip
MAX_LISTED = 3
MAX_LISTED_ROWS = 5
# the setting that runs a manifest with repeated audio anyway (a warning names the repeats)
ALLOW_REPEATS = "allow_duplicate_audio=true"


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the source and the offending rows."""


def _rows(positions: Sequence[int], limit: int = 10) -> str:
    """Row positions (0-based, data rows) as the CSV's line numbers (the header is line 1): the first
    ``limit`` and how many more, so that an error line stays one short line whatever the manifest's size."""
    rows = [str(i + 2) for i in list(positions)[:limit]]
    more = f" (+{len(positions) - limit} more)" if len(positions) > limit else ""
    return ", ".join(rows) + more


def check_rows(
    rows: Sequence[Mapping[str, str]],
    source: str,
    root: str | Path | None = None,
    required_roles: tuple[str, ...] = ROLES,
    check_files: bool = True,
) -> list[str]:
    """Check a manifest's rows (``clip_id``, ``path``, ``role`` already stripped strings) and return
    each row's path, relative ones joined to ``root``; raise :class:`ManifestError` naming the rows
    (empty or repeated clip_id, a role other than X, Y, A, B, a required role without clips, an empty
    path, a file not found: for a relative path, the folder it was resolved against)."""
    ids = [r["clip_id"] for r in rows]
    empty_id = [i for i, v in enumerate(ids) if v == ""]
    if empty_id:
        raise ManifestError(f"{source}: empty clip_id in row(s) {_rows(empty_id)}")
    seen = Counter(ids)
    dup = [i for i, v in enumerate(ids) if seen[v] > 1]
    if dup:
        repeated = sorted({ids[i] for i in dup})
        raise ManifestError(
            f"{source}: {len(repeated)} duplicate clip_id(s), e.g. {repeated[:5]}, in {len(dup)} rows: {_rows(dup)}; "
            "a clip_id names one row"
        )
    roles = [r["role"] for r in rows]
    bad_role = [i for i, v in enumerate(roles) if v not in ROLES]
    if bad_role:
        raise ManifestError(f"{source}: {_bad_roles([roles[i] for i in bad_role], bad_role)}")
    absent_roles = [r for r in required_roles if r not in roles]
    if absent_roles:
        raise ManifestError(f"{source}: no clips with role(s) {absent_roles}")
    given = [r["path"] for r in rows]
    empty_path = [i for i, v in enumerate(given) if v == ""]
    if empty_path:
        raise ManifestError(f"{source}: empty path in row(s) {_rows(empty_path)}")
    base = Path(root) if root is not None else None
    relative = [not Path(p).is_absolute() for p in given]
    paths = [str(base / p) if rel and base is not None else p for p, rel in zip(given, relative)]
    if check_files:
        not_found = [i for i, p in enumerate(paths) if not Path(p).is_file()]
        if not_found:
            first = not_found[0]
            explain = (
                f"; relative paths are resolved against {_root_words(base, source)} ({given[first]} -> {paths[first]})"
                if relative[first] and base is not None
                else ""
            )
            raise ManifestError(
                f"{source}: {len(not_found)} audio file(s) not found, e.g. {given[first]} "
                f"(row(s) {_rows(not_found)}){explain}; fix the path column or the files"
            )
    return paths


def validate_manifest(
    df: pd.DataFrame,
    source: str = "<manifest>",
    root: str | Path | None = None,
    check_files: bool = True,
) -> pd.DataFrame:
    """Return a normalised copy of ``df`` or raise :class:`ManifestError`.

    Normalisation: missing optional columns are added as "", all schema columns become str,
    ``path`` becomes absolute (relative to ``root``). Every role must have at least one clip;
    ``check_files`` verifies that every path exists (:func:`check_rows`).
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ManifestError(f"{source}: {_missing_columns(missing, list(df.columns))}")
    out = df.copy()
    for col, default in _OPTIONAL_DEFAULTS.items():
        if col not in out.columns:
            out[col] = default
    for col in MANIFEST_COLUMNS:
        out[col] = out[col].fillna("").astype(str).str.strip()
    out = out.reset_index(drop=True)
    out["path"] = check_rows(out[list(REQUIRED_COLUMNS)].to_dict("records"), source, root, check_files=check_files)
    return out


def read_manifest_rows(
    path: str | Path,
    root: str | Path | None = None,
    required_roles: tuple[str, ...] = ROLES,
    check_files: bool = True,
) -> list[dict[str, str]]:
    """The manifest CSV's rows as dicts (its columns in file order, then any schema column it lacks),
    checked (:func:`check_rows`), with stripped schema columns and absolute paths; no pandas. The one
    reader of manifest files: :func:`load_manifest` is its table. A UTF-8 byte-order mark (spreadsheet
    exports) is skipped; a row with more fields than the header is refused, naming the rows."""
    p = Path(path)
    if not p.is_file():
        raise ManifestError(f"{p}: manifest file does not exist")
    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f, restval="")
            columns = [c for c in (reader.fieldnames or [])]
            raw = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ManifestError(f"{p}: not a readable CSV ({exc})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ManifestError(f"{p}: {_missing_columns(missing, columns)}")
    long_rows = [i for i, r in enumerate(raw) if None in r]  # DictReader keeps extra fields under None
    if long_rows:
        raise ManifestError(
            f"{p}: more fields than the header's {len(columns)} columns in row(s) {_rows(long_rows)}; "
            "quote values that contain commas"
        )
    rows = [{**r, **{c: (r.get(c) or "").strip() for c in MANIFEST_COLUMNS}} for r in raw]
    paths = check_rows(rows, str(p), root if root is not None else p.parent, required_roles, check_files)
    for row, full in zip(rows, paths):
        row["path"] = full
    return rows


def manifest_columns(rows: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """The schema columns (:data:`MANIFEST_COLUMNS`) of :func:`read_manifest_rows`' rows as
    ``{column: values in row order}``."""
    return {c: [r[c] for r in rows] for c in MANIFEST_COLUMNS}


def _missing_columns(missing: list[str], columns: list[str]) -> str:
    """Every missing required column, the columns there are, and near misses (case, spaces)."""
    near = [
        f"{c!r} for {m!r}"
        for m in missing
        for c in columns
        if str(c).strip().lower() == m and c != m  # e.g. 'Role' or ' role'
    ]
    hint = f" (column names are exact: {', '.join(near)})" if near else ""
    return (
        f"missing column(s) {', '.join(missing)}{hint}; a manifest needs columns {', '.join(REQUIRED_COLUMNS)} "
        f"(optional: {', '.join(_OPTIONAL_DEFAULTS)}); its columns: {', '.join(map(str, columns)) or 'none'}"
    )


def _bad_roles(roles: list[str], positions: list[int]) -> str:
    """The roles that are not X, Y, A, B with their rows, the accepted spellings and, for lower-case
    ones, that roles are case-sensitive."""
    shown = ", ".join(repr(r) for r in sorted(set(roles))[:8])
    lower = sorted({r for r in roles if r.upper() in ROLES})
    case = (
        f"; roles are case-sensitive: write {', '.join(r.upper() for r in lower)} for {', '.join(map(repr, lower))}"
        if lower
        else ""
    )
    return f"role must be one of {', '.join(ROLES)} ({ROLE_MEANINGS}); got {shown} in row(s) {_rows(positions)}{case}"


def _root_words(base: Path, source: str) -> str:
    """The folder relative clip paths were resolved against, in words."""
    if os.path.realpath(base) == os.path.realpath(Path(source).parent):
        return f"the manifest's folder {base}"
    return f"the bias test's root {base} (bias_test.root)"


def load_manifest(path: str | Path, root: str | Path | None = None, check_files: bool = True) -> pd.DataFrame:
    """The rows of :func:`read_manifest_rows` as a table (every column a string); relative clip paths
    resolve against ``root`` or the CSV's folder."""
    import pandas as pd

    rows = read_manifest_rows(path, root=root, check_files=check_files)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else list(MANIFEST_COLUMNS), dtype=str)


def write_manifest(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as a manifest CSV (schema columns first), atomically."""
    cols = [c for c in MANIFEST_COLUMNS if c in df.columns] + [c for c in df.columns if c not in MANIFEST_COLUMNS]
    return atomic_write(path, lambda tmp: df[cols].to_csv(tmp, index=False))


def check_manifest_audio(
    rows: Sequence[Mapping[str, str]],
    source: str,
    cache_dir: str | Path | None,
    full: bool = False,
    allow_repeats: bool = False,
    max_seconds: float | None = None,
    limit_text: str | None = None,
) -> dict[str, AudioFacts]:
    """Every clip of the checked manifest ``rows`` (dicts with absolute ``path`` and ``role``, e.g.
    :func:`read_manifest_rows`) decodes as a stimulus, and no audio is listed twice.

    The clips' facts come from the audio index under ``cache_dir`` (``None``: no index, every clip is
    decoded): a file the index knows unchanged is not decoded unless ``full`` (the run's
    ``check_audio=full``: every clip decoded again and its record repaired). Bad files are named in one
    :class:`ManifestError` (their count and the first :data:`MAX_LISTED` with their reasons). Rows that
    repeat a file or its decoded audio (:func:`repeated_clips`) are refused with one line naming them,
    or, with ``allow_repeats``, named in one warning. Clips longer than ``max_seconds`` (the run's
    ``extraction.max_clip_seconds``; ``limit_text`` how the line names the limit, e.g. the auto limit's
    derivation) are refused in one line naming them. Returns each path's :class:`AudioFacts`.
    """
    paths, roles = [r["path"] for r in rows], [r["role"] for r in rows]
    facts = AudioIndex(cache_dir).facts(paths, full=full)
    problems = [(p, f) for p, f in facts.items() if isinstance(f, str)]
    if problems:
        shown = _first_listed([f"{p}: {_short(problem)}" for p, problem in problems])
        raise ManifestError(
            f"{source}: {len(problems)} of {len(facts)} clips cannot be used: {shown}; "
            "fix or replace those files, or drop their rows"
        )
    if max_seconds is not None:
        _refuse_long_clips(facts, float(max_seconds), source, limit_text)
    repeats = repeated_clips(paths, {p: f.sha256 for p, f in facts.items()})
    if repeats:
        named = _first_listed(
            [
                f"row(s) {_rows(group, MAX_LISTED_ROWS)} ({roles[group[0]]}: {paths[group[0]]}"
                f"{'' if len({paths[i] for i in group}) == 1 else ' and other files with the same audio'})"
                for group in repeats
            ]
        )
        n_rows = sum(len(group) - 1 for group in repeats)
        what = (
            f"{n_rows} row(s) repeat audio listed in another row (the same file or the same decoded audio): "
            f"{named}; repeated clips are not independent, so the permutation p-value and the standard "
            "error would be wrong"
        )
        if not allow_repeats:
            raise ManifestError(f"{source}: {what}; drop the repeated rows, or set {ALLOW_REPEATS} to run anyway")
        log.warning("%s: %s (run anyway: %s)", source, what, ALLOW_REPEATS)
    return {p: f for p, f in facts.items() if not isinstance(f, str)}


def _refuse_long_clips(
    facts: Mapping[str, AudioFacts], max_seconds: float, source: str, limit_text: str | None = None
) -> None:
    """One line naming the clips longer than ``max_seconds`` (the longest first), if any: extraction runs
    one forward over a whole clip, whose memory grows with its length. ``limit_text`` names the limit
    (default ``extraction.max_clip_seconds=<max_seconds>``)."""
    from speechbias.fileio.audio import SAMPLE_RATE  # with numpy, which the run imports next anyway

    long = sorted(
        ((f.n_samples / SAMPLE_RATE, p) for p, f in facts.items() if f.n_samples > max_seconds * SAMPLE_RATE),
        reverse=True,
    )
    if long:
        shown = _first_listed([f"{p} ({seconds:.0f} s)" for seconds, p in long])
        if limit_text is None:
            limit_text = f"extraction.max_clip_seconds={max_seconds:g}"
            fix = "cut those clips, or raise extraction.max_clip_seconds where memory allows"
        else:
            fix = "cut those clips, or run where there is more memory"
        raise ManifestError(
            f"{source}: {len(long)} clip(s) longer than {limit_text}: {shown}; extraction holds a whole clip "
            f"in one forward (its memory grows with the clip's length): {fix}"
        )


def repeated_clips(paths: Sequence[str], sha_of_path: Mapping[str, str] | None = None) -> list[list[int]]:
    """Groups of row positions (0-based, in order) of ``paths`` that list the same audio: the same file
    (compared resolved, symlinks followed) or, where ``sha_of_path`` gives a path's decoded-audio sha256,
    the same decoded audio; within a role or across roles. Only groups of two or more rows."""
    sha_of_path = sha_of_path or {}
    groups: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        key = sha_of_path.get(str(path)) or os.path.realpath(path)
        groups.setdefault(key, []).append(i)
    return [group for group in groups.values() if len(group) > 1]


# the manifest column each SE-curve resampling design resamples by (bias_test.resampling)
DESIGN_COLUMNS = {"paired": "pair_id", "stratified": "stratum"}


def check_resampling_ids(columns: Mapping[str, Sequence], design: str | None, source: str) -> None:
    """:class:`ManifestError` unless every target clip (X, Y) carries what the SE curve's resampling
    ``design`` resamples by: a ``stratum`` (``stratified``), or a ``pair_id`` that pairs it with exactly one
    clip of the other group (``paired``). ``columns``: ``{column: values in row order}``; ``iid``/None pass."""
    column = DESIGN_COLUMNS.get(str(design))
    if column is None:
        return
    fix = f"give each X and Y clip its {column}, or bias_test.resampling=iid, or speat.se_curve=false"
    targets = [
        (str(c), str(r), str(v or "").strip())
        for c, r, v in zip(columns["clip_id"], columns["role"], columns[column])
        if r in ("X", "Y")
    ]
    missing = [clip for clip, _, value in targets if not value]
    if missing:
        raise ManifestError(
            f"{source}: bias_test.resampling={design} resamples the SE curve by {column}, but {len(missing)} of "
            f"{len(targets)} target clips have none ({_first_listed(missing)}); {fix}"
        )
    if design != "paired":
        return
    members: dict[str, dict[str, list[str]]] = {}
    for clip, role, pair in targets:
        members.setdefault(pair, {"X": [], "Y": []})[role].append(clip)
    unpaired = [
        f"{pair} (X: {len(m['X'])}, Y: {len(m['Y'])})"
        for pair, m in members.items()
        if len(m["X"]) != 1 or len(m["Y"]) != 1
    ]
    if unpaired:
        raise ManifestError(
            f"{source}: bias_test.resampling=paired needs each pair_id on one X and one Y clip; {len(unpaired)} "
            f"pair id(s) are not ({_first_listed(unpaired)}); {fix}"
        )


def _first_listed(items: Sequence[str]) -> str:
    """The first :data:`MAX_LISTED` of ``items`` joined with ``; ``, and ``; ... (N more)`` for the rest."""
    more = f"; ... ({len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return "; ".join(items[:MAX_LISTED]) + more


def _short(problem: str, limit: int = 110) -> str:
    """A clip's problem for a list: cut before a parenthesised detail when it is long."""
    if len(problem) <= limit:
        return problem
    cut = problem.rfind(" (", 0, limit)
    return problem[:cut] if cut > 20 else problem[:limit] + "..."
