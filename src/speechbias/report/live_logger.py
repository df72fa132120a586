"""The Lightning logger of a train.py job's live W&B run: the Trainer's metrics (train and validation
losses) reach W&B while the head trains, in the run that :meth:`Tracker.publish` later completes with
the job's results.

Only the process that started the run logs to it: a copy pickled into spawned DDP workers
(``ddp_spawn``) holds no run and logs nothing (their metrics reach W&B with the results, as before).
Imported only where a Trainer is built (it imports Lightning).
"""

from __future__ import annotations

from pytorch_lightning.loggers.logger import Logger
from pytorch_lightning.utilities import rank_zero_only

from speechbias.report import wandb_run

STEP_KEY = "trainer/global_step"  # the Trainer's step, logged beside each metric (W&B's own _step counts calls)


class LiveRunLogger(Logger):
    """Sends ``log_metrics`` to the W&B ``run`` (:func:`speechbias.report.wandb_run.log_metrics`)."""

    def __init__(self, run):
        super().__init__()
        self._run = run
        self.logged = False  # whether metrics reached the run from this process

    @property
    def name(self) -> str:
        return "wandb"

    @property
    def version(self) -> str | None:
        return getattr(self._run, "id", None)

    @property
    def experiment(self):
        return self._run

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self._run is not None:
            wandb_run.log_metrics(self._run, {**metrics, **({STEP_KEY: step} if step is not None else {})})
            self.logged = True

    @rank_zero_only
    def log_hyperparams(self, params, *args, **kwargs) -> None:
        """Nothing: the run's config is the job's resolved config, given when the run is completed."""

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_run": None}
