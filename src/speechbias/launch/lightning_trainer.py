"""The Lightning ``Trainer`` of every task (``_target_`` of ``conf/trainer/*.yaml``), with a quiet console.

:func:`build_trainer` is ``pytorch_lightning.Trainer(**kwargs)`` after :func:`quiet_third_party_console`,
which removes, by exact message, what Lightning and torch print on every run but says nothing about
it: Lightning's advertising tips (``💡 Tip: ... litlogger``), the accelerator lines for hardware
that is neither present nor used (``TPU available: False``, ``GPU available: False, used: False``),
Lightning's ``The srun command is available on your system but is not used`` (printed by every
local run on a machine with SLURM installed: runs that SLURM starts are detected and need no hint),
and torch's deprecations of ``LeafSpec`` and of ``torch.distributed.nn.functional.all_gather`` that
Lightning 2.6 still triggers (every step, and every DDP gather). Every other message,
Lightning's and our own warnings included, is left as it is. The filters are installed when this
module is imported; the modules whose objects ``ddp_spawn`` workers unpickle (the extraction and
valence-head LightningModules) import it too, so those processes are quiet as well. Lightning itself is
imported only when a Trainer is built: a task config holds this factory whether or not its run needs a
Trainer (a run whose clips are all cached builds none).
"""

from __future__ import annotations

import logging
import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytorch_lightning as pl

# Lightning's INFO lines (logger ``<package>.utilities.rank_zero``) dropped from the console
LIGHTNING_INFO_NOISE = (
    re.compile(r"^💡 Tip: "),
    re.compile(r"^(TPU|HPU|IPU) available: False"),
    re.compile(r"^GPU available: False, used: False$"),
)
LIGHTNING_INFO_LOGGERS = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
)

# (message regex, category, module regex) of known third-party warnings, each ignored only there
THIRD_PARTY_WARNINGS = (
    # torch >= 2.9 deprecates LeafSpec; pytorch_lightning 2.6 utilities/_pytree.py still builds one per batch
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning, r"pytorch_lightning\.utilities\._pytree"),
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning, r"lightning\.pytorch\.utilities\._pytree"),
    # Lightning's SLURM detection outside SLURM wherever srun is on PATH (a PossibleUserWarning)
    (
        r"The `srun` command is available on your system but is not used",
        UserWarning,
        r"lightning_fabric\.plugins\.environments\.slurm",
    ),
    (
        r"The `srun` command is available on your system but is not used",
        UserWarning,
        r"lightning\.fabric\.plugins\.environments\.slurm",
    ),
    # torch >= 2.10 deprecates torch.distributed.nn.functional.all_gather; Lightning 2.6 all_gather uses it
    (
        r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
        FutureWarning,
        r"lightning_fabric\.utilities\.distributed",
    ),
    (
        r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
        FutureWarning,
        r"lightning\.fabric\.utilities\.distributed",
    ),
)


class DropLightningNoise(logging.Filter):
    """Drops log records whose message matches one of :data:`LIGHTNING_INFO_NOISE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(p.search(message) for p in LIGHTNING_INFO_NOISE)


def quiet_third_party_console() -> None:
    """Install the log filter and the scoped warning filters (idempotent)."""
    for name in LIGHTNING_INFO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropLightningNoise) for f in logger.filters):
            logger.addFilter(DropLightningNoise())
    for message, category, module in THIRD_PARTY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


def build_trainer(**kwargs) -> pl.Trainer:
    """``pytorch_lightning.Trainer(**kwargs)`` with :func:`quiet_third_party_console` in effect."""
    import pytorch_lightning as pl

    quiet_third_party_console()
    return pl.Trainer(**kwargs)


quiet_third_party_console()
