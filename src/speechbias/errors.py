"""Which exceptions are the user's to fix, and how they reach the console: one line, no traceback.

An error of user input (config value, manifest, audio file, corpus layout, missing weights or a missing
task argument) prints as ``error: <what is wrong and the fix> (HYDRA_FULL_ERROR=1 shows the traceback)``
and the command exits non-zero; the full traceback still goes to the job's log file. Anything else is
a bug and keeps its traceback.

The classes are named by their import path, so recognising one imports nothing: this module is read
before torch, Lightning or pandas are, and must stay fast to import.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

# exception classes (module.Class) whose message names the bad input and the fix
USER_ERROR_CLASSES = frozenset(
    {
        "speechbias.errors.ConfigError",
        "speechbias.errors.StorageError",
        "speechbias.stimuli.manifest.ManifestError",
        "speechbias.fileio.audio.AudioError",
        "speechbias.asr.corpora.CorpusError",
        "speechbias.stimuli.corpora.layout.CorpusLayoutError",
        "speechbias.stimuli.paper_lists.PaperListError",
        "speechbias.stimuli.selection.matching.SelectionError",
        "speechbias.ser.valence.ValenceDataError",
        "speechbias.sllm.data.SpokenStereoSetError",
        "speechbias.sllm.tts.TTSError",
        "speechbias.model_loading.MissingWeightsError",
        "speechbias.upstream.s3prl_import.S3PRLUnavailableError",
        "speechbias.upstream.s3prl.S3PRLUpstreamError",
        # a SLURM job's stale attempt refused a write into a folder its requeued copy now owns
        "speechbias.launch.slurm.attempt_fence.StaleAttemptError",
        # another live process writes the run folder (speechbias.launch.run_folder_lock)
        "speechbias.fileio.folder_lock.FolderBusyError",
        # a required config value (``???``) that was not given
        "omegaconf.errors.MissingMandatoryValue",
    }
)
# project error classes that are deliberately not user errors (wrong arguments from code, i.e. bugs)
NOT_USER_ERROR_CLASSES = frozenset(
    {"speechbias.stats.validation.StatsInputError", "speechbias.stats.associations.EqualAssociationsError"}
)

FULL_ERROR_HINT = "HYDRA_FULL_ERROR=1 shows the traceback"

log = logging.getLogger("speechbias")


class ConfigError(ValueError):
    """A config value that cannot be used (a command-line override, a path, a task argument); the
    message names the key, the value and the fix."""


class StorageError(OSError):
    """A folder the run must write to cannot take the file (disk full, read-only, not a folder); the
    message names the path and where to point the run instead."""


def _qualified_names(exc: BaseException) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__}


def find_user_error(exc: BaseException) -> BaseException | None:
    """``exc`` or the first exception it was raised from (``__cause__``/``__context__``, e.g. inside
    Hydra's ``InstantiationException``) that is a user input error; None when there is none."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _qualified_names(exc) & USER_ERROR_CLASSES:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def message_line(exc: BaseException) -> str:
    """The exception's message on one line (a multi-line message joined with ``; ``), without the
    ``full_key: ...`` lines OmegaConf appends."""
    text = str(exc.args[0]) if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("Caught ") and any(ln.startswith("Original Traceback") for ln in lines):
        # re-raised by a torch DataLoader worker: the original message is the traceback's last line
        name, _, message = lines[-1].partition(": ")
        lines = [message if message and name.split(".")[-1] == type(exc).__name__ else lines[-1]]
    key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), None)
    lines = [ln for ln in lines if not ln.startswith(("full_key:", "object_type=", "reference_type="))]
    message = "; ".join(lines) or type(exc).__name__
    if type(exc).__name__ == "MissingMandatoryValue" and key:
        return f"{key}: required, give it on the command line ({key}=...)"
    return message


def error_message(exc: BaseException) -> str:
    """One line saying what went wrong: the user error's message, else ``<ExceptionType>: <message>``."""
    user = find_user_error(exc)
    if user is not None:
        return message_line(user)
    return f"{type(exc).__name__}: {message_line(exc)}"


def error_line(exc: BaseException) -> str:
    """The console line of an error: ``error: <message> (HYDRA_FULL_ERROR=1 shows the traceback)``."""
    return f"error: {error_message(exc)} ({FULL_ERROR_HINT})"


def full_error_requested() -> bool:
    """True when the user asked for full tracebacks (``HYDRA_FULL_ERROR=1``)."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def log_traceback_to_files(exc: BaseException) -> None:
    """Write ``exc``'s full traceback to the log files of this job (Hydra's ``<job>.log``) only, not
    to the console."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, "%s", (text,), None)
    for handler in logging.getLogger().handlers + log.handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


@contextmanager
def user_error_ends_command() -> Iterator[None]:
    """A user error raised inside prints its one line (:func:`error_line`) and exits 1; anything else, or
    any error with ``HYDRA_FULL_ERROR=1``, goes on up (Hydra's callbacks before a run's folder is made)."""
    try:
        yield
    except Exception as exc:
        user = find_user_error(exc)
        if user is None or full_error_requested():
            raise
        print(error_line(user), file=sys.stderr)
        sys.exit(1)
