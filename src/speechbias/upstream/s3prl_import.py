"""Importing the optional s3prl package: the torchaudio APIs it still calls, and one line when it cannot.

s3prl 0.4.x calls ``torchaudio.set_audio_backend(...)`` and imports ``torchaudio.sox_effects`` when
``s3prl.nn`` is imported; torchaudio 2.9 removed both (audio I/O moved to torchcodec), so s3prl does
not import beside any current torchaudio. Where they are missing, :func:`import_s3prl_nn` adds a no-op
``set_audio_backend`` (s3prl's upstreams take waveforms, never files, here) and a
``torchaudio.sox_effects`` whose functions raise (only s3prl's MOS-prediction upstream and its
dataset loaders use them). Nothing is added to a torchaudio that still has them.

When torchaudio was found unloadable (:mod:`speechbias.optional_torchaudio`) or s3prl is not
installed, :class:`S3PRLUnavailableError` says so in one line with the fix.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types

from speechbias.optional_torchaudio import hide_unloadable_torchaudio

INSTALL_HINT = (
    "install the extra (`pip install -e '.[s3prl]'`); where torchaudio's compiled libraries do not load "
    "beside this torch (PyPI's torchaudio is a CUDA build), set them aside as README.md's 'Any s3prl "
    "upstream' shows"
)


class S3PRLUnavailableError(ImportError):
    """s3prl (or the torchaudio it needs) does not import in this environment."""


def _sox_effects_removed(*args, **kwargs):
    raise RuntimeError(
        "torchaudio.sox_effects was removed in torchaudio 2.9; this s3prl path needs an older torchaudio"
    )


def provide_removed_torchaudio_apis(torchaudio: types.ModuleType) -> list[str]:
    """Add ``set_audio_backend`` (no-op) and ``sox_effects`` (raising functions) where ``torchaudio``
    lacks them; returns the names added."""
    added = []
    if not hasattr(torchaudio, "set_audio_backend"):
        torchaudio.set_audio_backend = lambda backend=None: None
        added.append("set_audio_backend")
    if "torchaudio.sox_effects" not in sys.modules and not hasattr(torchaudio, "sox_effects"):
        try:
            importlib.import_module("torchaudio.sox_effects")
        except ImportError:
            module = types.ModuleType("torchaudio.sox_effects", "Stand-in: removed in torchaudio 2.9 (speechbias).")
            module.apply_effects_tensor = module.apply_effects_file = _sox_effects_removed
            module.effect_names = lambda: []
            sys.modules["torchaudio.sox_effects"] = module
            torchaudio.sox_effects = module
            added.append("sox_effects")
    return added


def import_s3prl_nn() -> types.ModuleType:
    """The ``s3prl.nn`` module, or :class:`S3PRLUnavailableError` with a one-line fix."""
    if "s3prl.nn" in sys.modules and sys.modules["s3prl.nn"] is not None:
        return sys.modules["s3prl.nn"]
    torchaudio_error = hide_unloadable_torchaudio()
    if torchaudio_error is not None:
        raise S3PRLUnavailableError(
            f"cannot import s3prl: torchaudio {s3prl_version('torchaudio')} is installed but cannot load "
            f"({torchaudio_error[:160]}); {INSTALL_HINT}"
        )
    try:
        if importlib.util.find_spec("torchaudio") is not None:
            provide_removed_torchaudio_apis(importlib.import_module("torchaudio"))
        return importlib.import_module("s3prl.nn")
    except Exception as err:  # ImportError, or OSError/RuntimeError from a mismatched torchaudio build
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise S3PRLUnavailableError(
            f"cannot import s3prl ({type(err).__name__}: {first_line}); {INSTALL_HINT}"
        ) from err


def s3prl_version(distribution: str = "s3prl") -> str:
    """Installed version of ``distribution`` (default s3prl); ``unknown`` when it has no metadata."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
