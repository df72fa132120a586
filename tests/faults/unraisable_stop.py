"""A command whose stop signal's handler runs where an exception cannot propagate (tests/faults/test_stop_in_callback.py).

``python unraisable_stop.py CONTEXT SIGNAL JOB_DIR SENT_FILE``: installs the stop handlers as ``evaluate.py`` does
(first, then ``ends_on_signals`` around the body, with a running job recorded in JOB_DIR), then makes CONTEXT run
a callback that sends this process SIGNAL (``os.kill`` to itself runs the Python handler before it returns, so
the handler runs inside the callback; it writes ``time.monotonic()`` to SENT_FILE first). CONTEXT:

* ``weakref``: a weakref callback (as importlib's ``_get_module_lock.<locals>.cb``);
* ``weakrefs``: two weakref callbacks of one object: the first to run sends the signal, the second prints
  ``another callback ran`` (the stop raised again there is unraisable too);
* ``del``: an object's ``__del__``;
* ``gc``: a ``gc.callbacks`` function (a collection's start);
* ``error``: no signal; a ``__del__`` raises ``ValueError`` (the interpreter's usual report);
* ``error-own-hook``: the same with an unraisable hook of this script's set before the handlers (it prints what
  it got on stdout).

After the callback the script prints ``ran on past the callback``, then runs on for 30 s (``finished``)."""

import sys

if sys.argv[1] == "error-own-hook":  # a hook set before the stop handlers: other unraisables still go to it
    sys.unraisablehook = lambda unraisable: print(
        f"own hook: {type(unraisable.exc_value).__name__}: {unraisable.exc_value}; in {unraisable.object.__qualname__}",
        flush=True,
    )

from speechbias.launch.signals import install_stop_handlers  # noqa: E402

install_stop_handlers()  # first, as the entry scripts

import gc  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import weakref  # noqa: E402
from pathlib import Path  # noqa: E402

from speechbias.launch.signals import ends_on_signals, running_job  # noqa: E402
from speechbias.results.job_status import JobStatus  # noqa: E402

context, signal_name, job_dir, sent_file = sys.argv[1:5]
signum = getattr(signal, signal_name)


def send_stop() -> None:
    Path(sent_file).write_text(repr(time.monotonic()))
    os.kill(os.getpid(), signum)


class Thing:
    pass


class StopsWhenDeleted:
    def __del__(self):
        send_stop()


class FailsWhenDeleted:
    def __del__(self):
        raise ValueError("not a stop")


def first_sends_stop(_: weakref.ref) -> None:
    if not Path(sent_file).exists():
        send_stop()
    else:
        print("another callback ran", flush=True)


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        gc.callbacks.remove(on_gc)
        send_stop()


with ends_on_signals():
    JobStatus("running", started=time.time(), pid=os.getpid()).write(job_dir)
    running_job(job_dir)
    if context == "weakref":
        thing = Thing()
        ref = weakref.ref(thing, lambda _: send_stop())
        del thing
    elif context == "weakrefs":
        thing = Thing()
        refs = [weakref.ref(thing, first_sends_stop), weakref.ref(thing, first_sends_stop)]
        del thing
    elif context == "del":
        stops = StopsWhenDeleted()
        del stops
    elif context == "gc":
        gc.callbacks.append(on_gc)
        gc.collect()
    elif context in ("error", "error-own-hook"):
        fails = FailsWhenDeleted()
        del fails
    else:
        raise SystemExit(f"error: unknown context {context!r}")
    print("ran on past the callback", flush=True)
    deadline = time.monotonic() + (30.0 if context in ("weakref", "weakrefs", "del", "gc") else 0.0)
    while time.monotonic() < deadline:
        time.sleep(0.05)
    running_job(None)
    print("finished", flush=True)
