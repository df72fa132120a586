"""Stimulus manifests: tables of clips with their role in a bias test (X, Y, A, B)."""

from speechbias.stimuli.manifest import (
    MANIFEST_COLUMNS,
    ROLES,
    ManifestError,
    load_manifest,
    validate_manifest,
    write_manifest,
)

__all__ = [
    "MANIFEST_COLUMNS",
    "ROLES",
    "ManifestError",
    "load_manifest",
    "validate_manifest",
    "write_manifest",
]
