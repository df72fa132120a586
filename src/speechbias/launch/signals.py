"""SIGTERM and SIGINT end a run honestly: within seconds, in any phase, with its status recorded.

What ``docker stop``, systemd, ``timeout``, ``kill``, SLURM's ``scancel`` (SIGTERM) and Ctrl-C (SIGINT)
send used to be logged and ignored (Lightning's SIGTERM handler) or to leave ``job_status.json`` at
``running``. :func:`install_stop_handlers` (the entry scripts before anything heavy, :func:`run_entry
<speechbias.launch.entry.run_entry>` in every job process) makes both signals raise :class:`RunStopped`
(a ``BaseException``: no ``except Exception`` swallows it; Lightning's own SIGTERM handler calls the
handler it found, this one) wherever the main thread is. The job records itself ``failed`` with the
signal (:func:`~speechbias.results.job_status.mark_stopped`), one line is printed and the process
exits 128 + the signal's number. What resumes stays whole: cache entries, results and checkpoints are
written by rename (``fileio.atomic_file``; Lightning saves ``last.ckpt`` through an fsspec transaction),
so an interrupted write leaves the old file or none.

* The phase the line names (start-up, extraction, statistics, training, writing) is read from the
  interrupted stack (:func:`phase_of`): its innermost frame of a module :data:`PHASES` names decides.
* A long call that does not return to Python in time (a compiled kernel, a C loop) cannot be
  interrupted; the numba kernels of ``stats`` return every ~0.1 s for that reason. If the process has
  not ended :data:`FORCE_EXIT_S` after the signal, a watchdog thread records the job and ends it
  (``os._exit``).
* A second signal while the first is handled is ignored (the watchdog bounds the wait).
* A handler that runs where an exception cannot propagate (inside a weakref callback such as importlib's
  module-lock ``cb``, a ``__del__``, a gc callback) raises there in vain: Python would print "Exception ignored
  in ..." and run on until the watchdog. The ``sys.unraisablehook`` installed with the handlers
  (:func:`_on_unraisable`) takes such a :class:`RunStopped` and raises it again at the main thread's next call
  outside that place (a one-shot ``sys.setprofile`` function); every other unraisable goes to the hook it
  found, unchanged.
* In a SLURM job run by submitit, its requeue signal (``USR2`` before the time limit, through
  ``hydra.launcher.signal_delay_s``) keeps its meaning: after it, SIGTERM (which SLURM sends to the job
  it requeues) is passed over as submitit itself does, so the checkpoint-and-requeue completes.
* A local sweep's process (:func:`sweep_started`) passes the signal on to the worker processes running
  its jobs (``hydra/launcher=parallel``: their pids are in their ``job_status.json``), waits up to
  :data:`WORKERS_WAIT_S` for them to record their end, then stops itself; the entry script prints the
  sweep's table (:func:`ends_on_signals`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
FORCE_EXIT_S = 4.0  # the watchdog's bound, after the signal (the promise is 5 s)
WORKERS_WAIT_S = 2.5  # how long a sweep's process waits for its workers to record their end
RESUME_HINT = "rerun the same command to resume"

# the innermost frame of these modules names the phase (module-name prefixes; a cache entry's write is
# extraction, a result file's is writing: the atomic writer itself names none)
PHASES: tuple[tuple[str, str], ...] = (
    ("speechbias.features", "extraction"),
    ("speechbias.upstream", "extraction"),
    ("speechbias.model_loading", "extraction"),
    ("pytorch_lightning.loops.prediction_loop", "extraction"),
    ("speechbias.stats", "statistics"),
    ("speechbias.speat", "statistics"),
    ("speechbias.aggregation", "statistics"),
    ("speechbias.callbacks", "statistics"),
    ("speechbias.ser", "training"),
    ("pytorch_lightning.loops.fit_loop", "training"),
    ("speechbias.report", "writing"),
    ("speechbias.results", "writing"),
    ("speechbias.tasks.run_markers", "writing"),
    ("speechbias.stimuli", "start-up"),
    ("speechbias.launch.config_checks", "start-up"),
    ("speechbias.launch.sweep_preflight", "start-up"),
)


class RunStopped(BaseException):
    """A stop signal ended the run: ``signum`` (SIGTERM, SIGINT) arrived during ``phase``."""

    def __init__(self, signum: int, phase: str = "start-up") -> None:
        self.signum, self.phase = int(signum), phase
        super().__init__(self.error)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (143 for SIGTERM, 130 for SIGINT), as a shell reports it."""
        return 128 + self.signum

    def __reduce__(self):  # a parallel sweep's worker sends it back to the sweep's process
        return (RunStopped, (self.signum, self.phase))

    @property
    def error(self) -> str:
        """The job's recorded error: ``stopped by SIGTERM during extraction`` (no phase: a sweep's process
        waiting for its workers)."""
        return f"stopped by {self.signal_name}" + (f" during {self.phase}" if self.phase else "")

    def line(self, what: str = "") -> str:
        """The one line printed: ``speechbias: stopped by SIGTERM during extraction; rerun ...``."""
        return f"speechbias: {what}{self.error}; {RESUME_HINT}"


class _State:
    """This process's handling: the stop under way, the job it records, the sweep it runs, a requeue."""

    stop: RunStopped | None = None
    job_dir: Path | None = None
    sweep: tuple[Path, str] | None = None  # (sweep folder, sweep id) of the multirun this process runs
    requeue_under_way = False
    sweep_stop = None  # hook(stop) run before a stopped sweep's table (on_sweep_stop), and the seconds it may take
    sweep_stop_s = 0.0
    guarded = False  # a RunStopped raised now is caught (ends_on_signals, run_entry)
    line_printed = False
    unraisablehook = None  # the sys.unraisablehook found when the handlers were installed (other unraisables)
    delegating = False  # that hook is running (an unraisable inside it goes to Python's default)


def phase_of(frame: FrameType | None) -> str:
    """The phase the interrupted stack ``frame`` is in (see :data:`PHASES`); ``start-up`` when none matches."""
    stack = []
    while frame is not None:
        stack.append(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    for module in stack:  # innermost first
        for prefix, phase in PHASES:
            if module == prefix or module.startswith(prefix + "."):
                return phase
    return "start-up"


def install_stop_handlers() -> bool:
    """SIGTERM and SIGINT raise :class:`RunStopped` in this process from now on (idempotent; only the
    main thread can set handlers: False elsewhere). In a submitit job, its requeue signal's handler is
    wrapped so that the SIGTERM of the requeue it starts is passed over."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if sys.unraisablehook is not _on_unraisable:
        _State.unraisablehook, sys.unraisablehook = sys.unraisablehook, _on_unraisable
    if all(signal.getsignal(s) is _on_stop_signal for s in STOP_SIGNALS):
        return True
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop_signal)
    _wrap_requeue_handler()
    return True


def stopped_before_handlers() -> None:
    """Ctrl-C before :func:`install_stop_handlers` ran: while an entry script imported this module (~0.1 s
    of imports; ~0.4 s on a loaded machine), Python's own SIGINT handler raised ``KeyboardInterrupt``,
    which the script catches and passes here: the same one line as later, exit 130 (the interpreter's
    exit: nothing has started). SIGTERM then is the system's default end, silent."""
    stop = RunStopped(signal.SIGINT, "start-up")
    print_stop_line(stop)
    raise SystemExit(stop.exit_code)


def handling_stops() -> bool:
    """Whether a run in this process has its stops handled here now (inside :func:`ends_on_signals` or
    :func:`stops_handled`)."""
    return _State.guarded


@contextmanager
def stops_handled() -> Iterator[None]:
    """Inside: SIGTERM/SIGINT raise :class:`RunStopped`, which the caller catches (:func:`run_entry
    <speechbias.launch.entry.run_entry>`, also in a job process no entry script started: a SLURM job, a
    parallel sweep's worker); after: the handlers and the guard as they were (a caller in-process)."""
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    previous_hook = sys.unraisablehook
    guarded = _State.guarded
    installed = install_stop_handlers()
    _State.guarded = True
    try:
        yield
    finally:
        _State.guarded = guarded
        if installed:
            for signum, handler in previous.items():
                if handler is not None:
                    signal.signal(signum, handler)
            sys.unraisablehook = previous_hook


def _wrap_requeue_handler() -> None:
    """Mark a requeue under way when submitit's requeue signal arrives, then let submitit handle it."""
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    requeue_signal = getattr(signal, f"SIG{name}", None) or getattr(signal, name, None)
    if requeue_signal is None or "SUBMITIT_EXECUTOR" not in os.environ and "SLURM_JOB_ID" not in os.environ:
        return
    original = signal.getsignal(requeue_signal)
    if not callable(original) or getattr(original, "_speechbias_wrapped", False):
        return

    def requeue(signum: int, frame: FrameType | None) -> None:
        _State.requeue_under_way = True
        original(signum, frame)

    requeue._speechbias_wrapped = True  # type: ignore[attr-defined]
    signal.signal(requeue_signal, requeue)


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    if _State.stop is not None or (_State.requeue_under_way and signum == signal.SIGTERM):
        return  # a second signal while the first is handled; or SLURM's SIGTERM of submitit's requeue
    phase = phase_of(frame)
    if _State.sweep is not None and phase == "start-up" and _State.job_dir is None:
        phase = ""  # a sweep's process between jobs or waiting for its workers
    stop = RunStopped(signum, phase)
    _State.stop = stop
    if not _State.guarded:  # before the entry script's body (its imports): nothing to record or unwind
        print_stop_line(stop)
        os._exit(stop.exit_code)
    threading.Thread(target=_force_exit, args=(stop,), name="speechbias-stop-watchdog", daemon=True).start()
    if _State.sweep is not None:
        _stop_sweep_workers(signum, *_State.sweep)
    raise stop


def _on_unraisable(unraisable) -> None:
    """``sys.unraisablehook``: a :class:`RunStopped` the handler raised where it cannot propagate (a weakref
    callback, ``__del__``, a gc callback; the main thread) is raised again at the main thread's next call,
    Python or C, outside that place; any other ``unraisable`` goes to the hook found at installation."""
    stop = unraisable.exc_value
    if isinstance(stop, RunStopped) and threading.current_thread() is threading.main_thread():
        sys.setprofile(_raising_at_next_call(stop))  # the last call here: this hook's own return is no call
        return
    previous = _State.unraisablehook
    if previous is None or previous is _on_unraisable or _State.delegating:
        previous = sys.__unraisablehook__
    _State.delegating = True
    try:
        previous(unraisable)
    finally:
        _State.delegating = False


def _raising_at_next_call(stop: RunStopped):
    """A one-shot ``sys.setprofile`` function that raises ``stop`` at the next call event: an error there
    propagates from the call (a return event's may be dropped while an exception unwinds). Raised inside
    another callback that cannot raise, it comes back through :func:`_on_unraisable` and waits again; the call
    of that hook itself (another unraisable reported first) is passed over: an error there would be dropped."""

    def raise_stop(frame: FrameType, event: str, arg: object) -> None:
        if event in ("call", "c_call") and frame.f_code is not _on_unraisable.__code__:
            sys.setprofile(None)
            raise stop

    return raise_stop


def running_job(job_dir: str | Path | None) -> None:
    """The job folder this process runs now (the watchdog records it), or None when its job ended."""
    _State.job_dir = Path(job_dir) if job_dir is not None else None


def record_stop(stop: RunStopped) -> None:
    """Record the running job (if any) as failed by ``stop`` (once; a job that recorded its end keeps it)."""
    job_dir, _State.job_dir = _State.job_dir, None
    if job_dir is not None:
        from speechbias.results.job_status import mark_stopped

        try:
            mark_stopped(job_dir, stop.error, stop.signal_name)
        except Exception:  # noqa: BLE001 - ending the process matters more than the record
            pass


def print_stop_line(stop: RunStopped, what: str = "") -> None:
    """Print ``stop``'s one line on stderr (once per process)."""
    if not _State.line_printed:
        _State.line_printed = True
        print(stop.line(what), file=sys.stderr, flush=True)


def exit_now(code: int) -> None:
    """End the process with ``code`` once logs and the console are flushed, without the interpreter's
    finalization: after a run with torch and Lightning loaded, its garbage collection of every module
    took ~5 s (measured with gdb in ``gc_collect_main``); what resumes is already on disk."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _force_exit(stop: RunStopped) -> None:
    """The watchdog: the process did not end in time (a long compiled call, a slow shutdown): record the
    job, print the line unless it was, end."""
    time.sleep(FORCE_EXIT_S + _State.sweep_stop_s)
    record_stop(stop)
    try:
        print_stop_line(stop)
    finally:
        os._exit(stop.exit_code)


def sweep_started(sweep_dir: str | Path, sweep_id: str) -> None:
    """This process runs the multirun ``sweep_id`` in ``sweep_dir`` (its workers get the signal too)."""
    _State.sweep = (Path(sweep_dir), sweep_id)


def sweep_ended() -> None:
    _State.sweep = None
    on_sweep_stop(None)


def on_sweep_stop(hook, seconds: float = 0.0) -> None:
    """``hook(stop)`` runs when a stop signal ends this process's sweep, before its table is printed (the
    SLURM launcher cancels the jobs it submitted and records each one's end); the watchdog gives it
    ``seconds`` beyond :data:`FORCE_EXIT_S`. ``None`` removes it."""
    _State.sweep_stop, _State.sweep_stop_s = hook, (float(seconds) if hook is not None else 0.0)


def _stop_sweep_workers(signum: int, sweep_dir: Path, sweep_id: str) -> None:
    """Pass ``signum`` on to the worker processes (children of this one) running jobs of this sweep, and
    wait up to :data:`WORKERS_WAIT_S` for them to record their end."""
    from speechbias.results.job_status import STATUS_FILE, read_status

    def running_workers() -> list[tuple[Path, int]]:
        found = []
        for path in sweep_dir.rglob(STATUS_FILE):
            status = read_status(path.parent)
            if status and status.status == "running" and status.sweep_id == sweep_id and status.pid != os.getpid():
                if _parent_of(status.pid) == os.getpid():
                    found.append((path.parent, status.pid))
        return found

    workers = running_workers()
    for _, pid in workers:
        try:
            os.kill(pid, signum)
        except OSError:
            pass
    deadline = time.monotonic() + WORKERS_WAIT_S
    while workers and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = running_workers()


def _parent_of(pid: int) -> int | None:
    """The parent process id of ``pid`` (Linux ``/proc``; None when it cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def ends_on_signals() -> Iterator[None]:
    """The body of an entry script's ``__main__``: a stop signal ends it with one line and exit 128 +
    the signal (a sweep's first prints its table: the jobs that ended, the one stopped)."""
    install_stop_handlers()
    _State.guarded = True
    try:
        yield
    except RunStopped as stop:
        record_stop(stop)
        sweep = _State.sweep
        if sweep is not None and _State.sweep_stop is not None:
            try:
                _State.sweep_stop(stop)
            except Exception:  # noqa: BLE001 - the table, the line and the exit code still come
                pass
        if sweep is not None:
            from speechbias.launch.sweep_status import report_sweep

            try:
                report_sweep(*sweep)
            except Exception:  # noqa: BLE001 - the line and the exit code matter more than the table
                pass
        print_stop_line(stop, "sweep " if sweep is not None else "")
        if "joblib.externals.loky" in sys.modules:
            # a parallel sweep's process (its jobs ran in loky workers; no model here): the interpreter's
            # own exit, whose loky handler releases the workers' locks; after os._exit loky's resource
            # tracker warned about them on stderr
            raise SystemExit(stop.exit_code) from None
        exit_now(stop.exit_code)
