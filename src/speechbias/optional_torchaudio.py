"""torchaudio is optional (the s3prl extra brings it): an installed torchaudio that cannot load must
not break the project.

transformers decides whether torchaudio is available with ``importlib.util.find_spec("torchaudio")``
(``transformers.utils.import_utils.is_torchaudio_available``) and, when it finds it, imports it in
``transformers.audio_utils``, which every speech model and feature extractor imports. PyPI's
torchaudio is a CUDA build whose compiled library does not load beside a CPU torch (``OSError:
Could not load this library: .../torchaudio/lib/_torchaudio.so``): with the s3prl extra installed,
even the weight-free fbank run and the test collection failed.

:func:`install_import_hook` (run by ``import speechbias``; it imports nothing) puts a one-shot
finder first on ``sys.meta_path``. Just before the first ``import transformers`` or ``import s3prl``
it calls :func:`hide_unloadable_torchaudio`: if torchaudio is installed, it is imported once; if that
fails, the half-imported modules are removed and ``sys.modules["torchaudio"] = None`` is set, Python's
marker for an absent module (``find_spec`` returns None, ``import torchaudio`` raises ImportError), and
one warning line says so. transformers then runs without torchaudio; the s3prl upstream says it cannot
import. Without torchaudio installed the check is one ``find_spec``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import logging
import sys

log = logging.getLogger(__name__)

#: top-level imports that may import torchaudio (transformers.audio_utils; s3prl at import)
TRIGGERS = frozenset({"transformers", "s3prl"})

_load_error: str | None = None


def load_error() -> str | None:
    """Why the installed torchaudio could not load (``<ExceptionType>: <first line>``); None when it
    loaded, is not installed, or has not been checked yet."""
    return _load_error


def _version() -> str:
    try:
        return importlib.metadata.version("torchaudio")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def hide_unloadable_torchaudio() -> str | None:
    """Import an installed torchaudio once; if that fails, make it absent for this process and log one
    warning line. Returns :func:`load_error`. Idempotent; a torchaudio already imported (or already
    marked absent) is left as it is."""
    global _load_error
    if "torchaudio" in sys.modules or importlib.util.find_spec("torchaudio") is None:
        return _load_error
    try:
        importlib.import_module("torchaudio")
    except Exception as err:  # OSError (a library built for another torch/device), ImportError, RuntimeError
        for name in [m for m in sys.modules if m == "torchaudio" or m.startswith("torchaudio.")]:
            del sys.modules[name]
        sys.modules["torchaudio"] = None
        first_line = (str(err).strip().splitlines() or [""])[0][:200]
        _load_error = f"{type(err).__name__}: {first_line}".rstrip(": ")
        log.warning(
            "torchaudio %s is installed but cannot load (%s); running without it (only the s3prl "
            "upstream needs it: README.md, 'Any s3prl upstream', says how to make it load)",
            _version(),
            _load_error,
        )
    return _load_error


class _BeforeFirstImport(importlib.abc.MetaPathFinder):
    """Runs :func:`hide_unloadable_torchaudio` when a :data:`TRIGGERS` module is first looked up, then
    leaves ``sys.meta_path``; it never finds anything itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in TRIGGERS:
            remove_import_hook()
            hide_unloadable_torchaudio()
        return None


def install_import_hook() -> None:
    """Register the one-shot check (idempotent); nothing is imported now."""
    if not any(isinstance(finder, _BeforeFirstImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BeforeFirstImport())


def remove_import_hook() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _BeforeFirstImport)]
