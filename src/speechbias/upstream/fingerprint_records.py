"""Fingerprints of Hugging Face upstreams, remembered per input state, so that a warm run builds no model.

An :class:`~speechbias.upstream.hf.HFUpstream`'s fingerprint fields come from its built config: the
model's ``config.json`` as transformers reads it (its class defaults filled in), the commit the cache
resolves the revision to, the family adapter's fields. Asking for them imports torch and transformers
(~5 CPU-s), which a run whose every clip is cached needs for nothing else. Whenever such an upstream is
built (:meth:`speechbias.upstream.deferred.DeferredUpstream.build`), its fields, name, display name and
family are written to a record named by the sha256 of what determines them (:func:`record_inputs`):

- the upstream's config node (resolved, ``_target_`` included);
- the source of the code that computes them (every module under ``speechbias/upstream/``,
  ``model_loading.py`` and ``library_internals/``): any edit there makes every record a miss;
- the installed transformers version (its config classes fill in the defaults);
- the model files a build reads: for a local folder, each file's name, size, mtime_ns and ctime_ns; for
  a hub id, the snapshot the local Hugging Face cache resolves the revision to (loading is cache-first:
  :func:`speechbias.model_loading.load_pretrained`) and each file in it (name, the file it resolves to,
  size); an inline config (``model_type`` + ``config``) reads none.

A hub id not in the local cache has no inputs (its build may download; nothing is recorded or read).
Records live under the feature cache folder (``<cache>/upstream_fingerprints/<sha[:2]>/<sha>.json``),
each with the inputs it was made for and an xxh3-128 checksum: a corrupt record, or one made for other
inputs, is a miss (warned once) and is replaced at the next build. A build after a record answered
compares the two (:meth:`DeferredUpstream.build`): a difference is an error naming the record, which is
removed. Import-light (standard library, xxhash; huggingface_hub for a hub id only): no torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.checksummed_record import verified_body, with_checksum
from speechbias.model_loading import cached_snapshot, local_dir

log = logging.getLogger(__name__)

RECORD_FOLDER = "upstream_fingerprints"
#: the upstream targets whose fingerprint is recorded (any other target not fingerprinted from its
#: config, such as s3prl's, is built to answer)
RECORDED_TARGETS = frozenset(
    {"speechbias.upstream.hf.HFUpstream", "speechbias.upstream.hf.HFUpstream.from_config_dict"}
)
_PACKAGE = Path(__file__).resolve().parents[1]  # src/speechbias
#: the code that computes an HF upstream's fingerprint fields (folders: every .py below them)
FINGERPRINT_CODE = ("upstream", "model_loading.py", "library_internals")


@dataclass(frozen=True)
class RecordedIdentity:
    """What a built upstream said of itself: ``fields`` (``fingerprint_fields()``), ``name``,
    ``display_name`` and ``family``."""

    fields: dict
    name: str
    display_name: str | None
    family: str


class _BadRecord(Exception):
    """A record that must not be used (internal: callers see a miss)."""


def fingerprint_code_sha256() -> str:
    """sha256 hex over the relative path and bytes of every module of :data:`FINGERPRINT_CODE`."""
    sha = hashlib.sha256()
    for part in FINGERPRINT_CODE:
        root = _PACKAGE / part
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            sha.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
            sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()


def _transformers_version() -> str | None:
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def _local_files(folder: Path) -> list[list]:
    """[name, size, mtime_ns, ctime_ns] of each regular file of a local model folder, in name order."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            st = path.stat()
            rows.append([path.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    return rows


def _hub_snapshot(model_id: str, revision: str | None, cache_dir: str | None) -> dict | None:
    """The snapshot of the local Hugging Face cache that ``revision`` of ``model_id`` resolves to: its
    folder and [name, resolved file, size] of each file in it; None when config.json is not cached."""
    snapshot = cached_snapshot(model_id, revision, cache_dir)
    if snapshot is None:
        return None
    files = []
    for path in sorted(snapshot.rglob("*")):
        if path.is_file():
            resolved = os.path.realpath(path)
            files.append([str(path.relative_to(snapshot)), resolved, os.stat(resolved).st_size])
    return {"snapshot": str(snapshot), "files": files}


def record_inputs(config: dict) -> dict | None:
    """What determines the fingerprint fields of the upstream of ``config`` (a plain, resolved upstream
    config with ``_target_``), or None when they cannot be known before a build (a target not in
    :data:`RECORDED_TARGETS`, a hub id not in the local cache, a local folder that cannot be listed)."""
    if config.get("_target_") not in RECORDED_TARGETS:
        return None
    inputs: dict = {
        "config": config,
        "code_sha256": fingerprint_code_sha256(),
        "transformers": _transformers_version(),
    }
    model_id = config.get("model_id")
    if model_id is None:
        return {**inputs, "files": None}
    if not isinstance(model_id, str) or not model_id:
        return None
    try:
        folder = local_dir(model_id)  # MissingWeightsError (an OSError) for a missing one: the build says so
        if folder is not None:
            return {**inputs, "files": {"local": str(folder.resolve()), "listing": _local_files(folder)}}
        snapshot = _hub_snapshot(model_id, config.get("revision"), config.get("cache_dir"))
    except (OSError, ValueError):  # a missing or unreadable folder, an id no path can hold
        return None
    return None if snapshot is None else {**inputs, "files": {"hub": model_id, **snapshot}}


class FingerprintRecords:
    """The records under ``cache_root`` (``<cache_root>/upstream_fingerprints``); safe for concurrent
    writers (atomic records; writers of one record write the same content)."""

    def __init__(self, cache_root: str | Path):
        self.folder = Path(cache_root) / RECORD_FOLDER
        self._reported: set[Path] = set()

    def path(self, inputs: dict) -> Path:
        key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def lookup(self, inputs: dict) -> RecordedIdentity | None:
        """The identity recorded for ``inputs`` (:func:`record_inputs`), or None (no record, or a corrupt
        one or one made for other inputs: warned once)."""
        path = self.path(inputs)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            rec = verified_body(text)
            if rec.get("inputs") != inputs:
                raise _BadRecord("made for other inputs")
            identity = RecordedIdentity(**rec["identity"])
            if not isinstance(identity.fields, dict) or not isinstance(identity.family, str):
                raise _BadRecord("malformed identity")
        except (ValueError, KeyError, TypeError, _BadRecord) as exc:
            if path not in self._reported:
                self._reported.add(path)
                log.warning("upstream fingerprint record %s is unusable (%s); the upstream will be built", path, exc)
            return None
        return identity

    def remember(self, inputs: dict, identity: RecordedIdentity) -> Path:
        """Record (atomically) that the upstream of ``inputs`` has ``identity``."""
        path = self.path(inputs)
        text = json.dumps(with_checksum({"inputs": inputs, "identity": asdict(identity)}), sort_keys=True)
        atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        self._reported.discard(path)
        return path

    def forget(self, inputs: dict) -> None:
        """Remove the record of ``inputs`` (if any)."""
        self.path(inputs).unlink(missing_ok=True)
