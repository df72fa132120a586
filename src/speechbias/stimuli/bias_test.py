"""A bias test: which clips are targets X, Y and attributes A, B, and how to resample them.

A test gets its manifest either from a CSV (``manifest``) or from a ``builder`` (a callable that
returns a manifest DataFrame, e.g. a selection procedure over a corpus), whose result is written
once to ``manifest`` and reused. Any user-supplied manifest makes a valid bias test. Labels of X and
Y not given are the manifest's own group names (the paper tests' come from their entry in
:mod:`speechbias.stimuli.registry`).

A user's manifest given to a shipped demo test (``python evaluate.py bias_test.manifest=my.csv``, the
README's way) is the user's test, not the demo's: the demo config names its own clips in
``demo_manifest``, and a test whose ``manifest`` is another file is named after that file (unless
``bias_test.name=...`` says otherwise), labelled from its group column, resampled as its pair ids allow,
and carries no demo caveat, espeak label or human IAT value of the demo.

:meth:`BiasTest.load` gives the manifest as a DataFrame; :meth:`BiasTest.load_columns` gives its schema
columns as lists, read without pandas when the manifest is a file (what a SpEAT run needs: a warm run
imports no pandas).

A manifest that exists before a run has its clips checked before the run (tasks/input_checks); one that
:meth:`BiasTest.load` builds (or finds written by a parallel job while it waited for the lock) is checked
there with the same :func:`~speechbias.stimuli.manifest.check_manifest_audio`, given the run's
:class:`ClipCheck`, and a build that fails the check is not written (a rerun builds and checks it again).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from speechbias.stimuli.manifest import (
    MANIFEST_COLUMNS,
    ManifestError,
    check_manifest_audio,
    load_manifest,
    manifest_columns,
    read_manifest_rows,
    validate_manifest,
    write_manifest,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

RESAMPLING_DESIGNS = ("iid", "paired", "stratified")


@dataclass(frozen=True)
class ClipCheck:
    """The run's check of the clips of a manifest built during the run (the pre-run check's settings):
    ``cache_dir`` the audio index's cache folder (None: every clip decoded), ``check_audio`` ``changed``
    or ``full`` (every clip decoded again), ``allow_duplicate_audio`` repeated audio warned about, not
    refused; ``max_seconds`` the longest clip taken and ``limit_text`` how a refusal names that limit (the
    run's ``extraction.max_clip_seconds``: speechbias.features.clip_memory.clip_length_limit; None: any)."""

    cache_dir: str | None = None
    check_audio: str = "changed"
    allow_duplicate_audio: bool = False
    max_seconds: float | None = None
    limit_text: str | None = None

    def apply(self, df: pd.DataFrame, source: str) -> None:
        """Check the clips of ``df`` (a validated manifest: absolute paths) or raise ManifestError."""
        check_manifest_audio(
            df[["path", "role"]].to_dict("records"),
            source,
            self.cache_dir,
            full=self.check_audio == "full",
            allow_repeats=self.allow_duplicate_audio,
            max_seconds=self.max_seconds,
            limit_text=self.limit_text,
        )


@dataclass
class BiasTest:
    """One SpEAT test. ``human_iat_d`` is the human IAT effect size (None if unknown).

    ``x_label`` / ``y_label`` None: set by :meth:`load` to the one group name of the X / Y clips of
    the manifest ("X" / "Y" when they have none or several); ``a_label`` / ``b_label`` None likewise
    ("pleasant" / "unpleasant" when they have none or several).
    ``demo_manifest``: the shipped clips of a demo test; a ``manifest`` other than it makes the test the
    user's (see the module docstring; ``user_manifest`` is then True and ``demo_manifest`` None).
    """

    name: str
    manifest: str | None = None
    builder: Callable[[], pd.DataFrame] | None = None
    root: str | None = None
    human_iat_d: float | None = None
    resampling: str = "iid"
    x_label: str | None = None
    y_label: str | None = None
    a_label: str | None = "pleasant"
    b_label: str | None = "unpleasant"
    description: str = ""
    demo_manifest: str | None = None
    user_manifest: bool = False

    def __post_init__(self):
        if self.resampling not in RESAMPLING_DESIGNS:
            raise ValueError(
                f"bias test {self.name}: resampling must be one of {RESAMPLING_DESIGNS}, got {self.resampling!r}"
            )
        if self.manifest is None and self.builder is None:
            raise ValueError(f"bias test {self.name}: needs a manifest path or a builder")
        if (
            self.demo_manifest is not None
            and self.manifest is not None
            and not _same_file(self.manifest, self.demo_manifest)
        ):
            self._become_user_test()

    def _become_user_test(self) -> None:
        """A demo config given another manifest: the user's test (see the module docstring)."""
        if self.name == Path(self.demo_manifest).stem:  # the demo's own name, not a bias_test.name=...
            self.name = Path(self.manifest).stem
        self.x_label = self.y_label = self.a_label = self.b_label = None
        self.human_iat_d = None
        self.description = f"user manifest {self.manifest}"
        self.demo_manifest = None
        self.user_manifest = True

    def load(self, clip_check: ClipCheck | None = None) -> pd.DataFrame:
        """The validated manifest; built (and written to ``manifest``) on first use if needed. A manifest
        built here, or written by a parallel job while this one waited, has its clips checked with
        ``clip_check`` (the run's settings; None: not checked) before it is written or used."""
        df = self._read_or_build(clip_check)
        self._take_from_manifest(list(df["role"]), list(df["group"]), list(df["pair_id"]))
        return df

    def load_columns(self, clip_check: ClipCheck | None = None) -> dict[str, list[str]]:
        """The validated manifest's schema columns (:data:`~speechbias.stimuli.manifest.MANIFEST_COLUMNS`,
        absolute paths) as ``{column: values in row order}``, the same values :meth:`load` gives. A
        manifest file is read without pandas (:func:`~speechbias.stimuli.manifest.read_manifest_rows`); a
        manifest not built yet is built (and checked) by :meth:`load`."""
        if self.manifest is not None and Path(self.manifest).is_file():
            rows = read_manifest_rows(self.manifest, root=self.root)
            columns = manifest_columns(rows)
            self._take_from_manifest(columns["role"], columns["group"], columns["pair_id"])
            return columns
        df = self.load(clip_check)
        return {c: list(df[c]) for c in MANIFEST_COLUMNS}

    def _take_from_manifest(self, roles: Sequence[str], groups: Sequence[str], pair_ids: Sequence[str]) -> None:
        """The labels not given (each role's one group name, else its fallback) and, for a user's
        manifest, the resampling its pair ids allow (paired when every X and Y clip has one)."""
        for role, attr, fallback in (
            ("X", "x_label", "X"),
            ("Y", "y_label", "Y"),
            ("A", "a_label", "pleasant"),
            ("B", "b_label", "unpleasant"),
        ):
            if getattr(self, attr) is None:
                named = {g for r, g in zip(roles, groups) if r == role} - {""}
                setattr(self, attr, named.pop() if len(named) == 1 else fallback)
        if self.user_manifest:
            targets = [p for r, p in zip(roles, pair_ids) if r in ("X", "Y")]
            self.resampling = "paired" if all(p != "" for p in targets) else "iid"

    def _read_or_build(self, clip_check: ClipCheck | None) -> pd.DataFrame:
        if self.manifest is not None and Path(self.manifest).is_file():  # its clips were checked before the run
            return load_manifest(self.manifest, root=self.root)
        if self.builder is None:
            raise ManifestError(
                f"bias test {self.name}: manifest {self.manifest} does not exist and no builder is configured"
            )
        if self.manifest is None:
            return self._checked(self._build(), clip_check, f"bias test {self.name} (stimuli built by its builder)")
        # parallel jobs of a sweep that need the same test build its manifest once: the first holds the
        # lock and builds, the others wait and read what it wrote
        Path(self.manifest).parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{self.manifest}.lock"):
            if Path(self.manifest).is_file():  # written while this job waited: not checked before the run
                return self._checked(load_manifest(self.manifest, root=self.root), clip_check, self.manifest)
            # checked before it is written: a refused build leaves no manifest for a rerun to reuse
            df = self._build()
            try:
                self._checked(df, clip_check, f"bias test {self.name}, built for {self.manifest}")
            except ManifestError as exc:
                raise ManifestError(f"{exc} (the manifest was not written: a rerun builds it again)") from exc
            # read back what was written, so a fresh build and a cached one are the same table
            return load_manifest(write_manifest(df, self.manifest), root=self.root)

    def _build(self) -> pd.DataFrame:
        log.info("building stimuli for bias test %s", self.name)
        return validate_manifest(self.builder(), source=f"builder of {self.name}", root=self.root)

    @staticmethod
    def _checked(df: pd.DataFrame, clip_check: ClipCheck | None, source: str) -> pd.DataFrame:
        if clip_check is not None:
            clip_check.apply(df, source)
        return df


def _same_file(a: str, b: str) -> bool:
    """Whether two manifest paths name the same file (symlinks and ``..`` resolved)."""
    return os.path.realpath(os.path.expanduser(str(a))) == os.path.realpath(os.path.expanduser(str(b)))
