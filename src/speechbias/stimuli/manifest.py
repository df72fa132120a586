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

Any further columns are free metadata and are kept as they are.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from speechbias.fileio.atomic_file import atomic_write
from speechbias.roles import ROLES

MANIFEST_COLUMNS = ("clip_id", "path", "role", "group", "speaker", "pair_id", "stratum")
REQUIRED_COLUMNS = ("clip_id", "path", "role")
_OPTIONAL_DEFAULTS = {"group": "", "speaker": "", "pair_id": "", "stratum": ""}


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the source and the offending rows."""


def _rows(index) -> str:
    rows = [str(i + 2) for i in list(index)[:10]]  # +2: 1-based and the header line
    more = f" (+{len(index) - 10} more)" if len(index) > 10 else ""
    return ", ".join(rows) + more


def validate_manifest(
    df: pd.DataFrame,
    source: str = "<manifest>",
    root: str | Path | None = None,
    required_roles: tuple[str, ...] = ROLES,
    check_files: bool = True,
) -> pd.DataFrame:
    """Return a normalised copy of ``df`` or raise :class:`ManifestError`.

    Normalisation: missing optional columns are added as "", all schema columns become str,
    ``path`` becomes absolute (relative to ``root``). ``required_roles`` must each have at
    least one clip; ``check_files`` verifies that every path exists.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ManifestError(f"{source}: missing required column(s) {missing}; has {list(df.columns)}")
    out = df.copy()
    for col, default in _OPTIONAL_DEFAULTS.items():
        if col not in out.columns:
            out[col] = default
    for col in MANIFEST_COLUMNS:
        out[col] = out[col].fillna("").astype(str).str.strip()
    empty_id = out.index[out["clip_id"] == ""]
    if len(empty_id):
        raise ManifestError(f"{source}: empty clip_id in row(s) {_rows(empty_id)}")
    dup = out.index[out["clip_id"].duplicated(keep=False)]
    if len(dup):
        raise ManifestError(
            f"{source}: duplicate clip_id {sorted(set(out.loc[dup, 'clip_id']))[:5]} in row(s) {_rows(dup)}"
        )
    bad_role = out.index[~out["role"].isin(ROLES)]
    if len(bad_role):
        raise ManifestError(
            f"{source}: role must be one of {list(ROLES)}; got {sorted(set(out.loc[bad_role, 'role']))} "
            f"in row(s) {_rows(bad_role)}"
        )
    absent_roles = [r for r in required_roles if not (out["role"] == r).any()]
    if absent_roles:
        raise ManifestError(f"{source}: no clips with role(s) {absent_roles}")
    empty_path = out.index[out["path"] == ""]
    if len(empty_path):
        raise ManifestError(f"{source}: empty path in row(s) {_rows(empty_path)}")
    base = Path(root) if root is not None else None
    if base is not None:
        out["path"] = [str(p if Path(p).is_absolute() else (base / p)) for p in out["path"]]
    if check_files:
        not_found = out.index[[not Path(p).is_file() for p in out["path"]]]
        if len(not_found):
            first = out.loc[not_found[0], "path"]
            raise ManifestError(
                f"{source}: {len(not_found)} audio file(s) not found, e.g. {first} (row(s) {_rows(not_found)})"
            )
    return out.reset_index(drop=True)


def load_manifest(
    path: str | Path,
    root: str | Path | None = None,
    required_roles: tuple[str, ...] = ROLES,
    check_files: bool = True,
) -> pd.DataFrame:
    """Read and validate a manifest CSV; relative clip paths resolve against ``root`` or the CSV's folder."""
    p = Path(path)
    if not p.is_file():
        raise ManifestError(f"{p}: manifest file does not exist")
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except Exception as exc:
        raise ManifestError(f"{p}: not a readable CSV ({exc})") from exc
    return validate_manifest(
        df,
        source=str(p),
        root=root if root is not None else p.parent,
        required_roles=required_roles,
        check_files=check_files,
    )


def write_manifest(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as a manifest CSV (schema columns first), atomically."""
    cols = [c for c in MANIFEST_COLUMNS if c in df.columns] + [c for c in df.columns if c not in MANIFEST_COLUMNS]
    return atomic_write(path, lambda tmp: df[cols].to_csv(tmp, index=False))
