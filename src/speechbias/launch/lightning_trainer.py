"""The Lightning ``Trainer`` of every task (``_target_`` of ``conf/trainer/*.yaml``), with a quiet console.

:func:`build_trainer` is ``pytorch_lightning.Trainer(**kwargs)`` after
:func:`speechbias.console_quieting.quiet_third_party_console` (third-party noise dropped by exact message).
Lightning itself is imported only when a Trainer is built: a task config holds this factory whether or not
its run needs a Trainer (a run whose clips are all cached builds none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from speechbias.console_quieting import quiet_third_party_console

if TYPE_CHECKING:
    import pytorch_lightning as pl


def build_trainer(**kwargs) -> pl.Trainer:
    """``pytorch_lightning.Trainer(**kwargs)`` with :func:`quiet_third_party_console` in effect and the
    project's stop handlers put back in front of Lightning's (:func:`_stop_handlers_first`)."""
    import pytorch_lightning as pl

    quiet_third_party_console()
    callbacks = list(kwargs.pop("callbacks", None) or [])
    return pl.Trainer(callbacks=[*callbacks, _stop_handlers_first()], **kwargs)


def _stop_handlers_first():
    """The :class:`~speechbias.launch.stop_handlers_callback.StopHandlersFirst` callback (a module of its own,
    imported here: it imports Lightning at its top, and ddp_spawn pickles the Trainer's callbacks by name)."""
    from speechbias.launch.stop_handlers_callback import StopHandlersFirst

    return StopHandlersFirst()
