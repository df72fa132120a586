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
    """A callback that, when a stage starts (after Lightning's SignalConnector registered its SIGTERM handler),
    gives SIGTERM and SIGINT back to :mod:`speechbias.launch.signals` alone, in a run whose stops it handles and
    whose ranks Lightning did not start itself (one process; a SLURM job's rank). Lightning's handler runs
    first and, under DDP, calls ``dist.broadcast`` inside the handler: after ``scancel`` of a two-node job a
    rank waited there in a collective the other rank never joined, the project's handler (and its watchdog)
    never ran, and SLURM SIGKILLed both ranks with nothing recorded. Where Lightning started the ranks
    (``ddp`` on one machine, ``ddp_spawn``) its handler stays: it passes the signal on to them."""
    from pytorch_lightning.callbacks import Callback

    from speechbias.launch.signals import handling_stops, install_stop_handlers

    class StopHandlersFirst(Callback):
        def _reinstall(self, trainer) -> None:
            environment = getattr(trainer.strategy, "cluster_environment", None)
            external = environment is not None and environment.creates_processes_externally  # SLURM's ranks
            if handling_stops() and (trainer.strategy.launcher is None or external):
                install_stop_handlers()

        def on_train_start(self, trainer, pl_module) -> None:
            self._reinstall(trainer)

        def on_predict_start(self, trainer, pl_module) -> None:
            self._reinstall(trainer)

        def on_validation_start(self, trainer, pl_module) -> None:
            self._reinstall(trainer)

        def on_test_start(self, trainer, pl_module) -> None:
            self._reinstall(trainer)

    return StopHandlersFirst()
