"""The Trainer callback that puts the project's stop handlers back in front of Lightning's.

When a stage starts (after Lightning's SignalConnector registered its SIGTERM handler), it gives SIGTERM and
SIGINT back to :mod:`speechbias.launch.signals` alone, in a run whose stops it handles and whose ranks Lightning
did not start itself (one process; a SLURM job's rank). Lightning's handler runs first and, under DDP, calls
``dist.broadcast`` inside the handler: after ``scancel`` of a two-node job a rank waited there in a collective
the other rank never joined, the project's handler (and its watchdog) never ran, and SLURM SIGKILLed both
ranks with nothing recorded. Where Lightning started the ranks (``ddp`` on one machine, ``ddp_spawn``) its
handler stays: it passes the signal on to them.

A module of its own, imported when a Trainer is built (:mod:`speechbias.launch.lightning_trainer`): it imports
Lightning at its top, and a class defined at module level is what ``ddp_spawn`` can pickle with the Trainer.
"""

from __future__ import annotations

from pytorch_lightning.callbacks import Callback

from speechbias.launch.signals import handling_stops, install_stop_handlers


class StopHandlersFirst(Callback):
    """See the module docstring."""

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
