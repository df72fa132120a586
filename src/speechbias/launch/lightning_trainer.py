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
    """``pytorch_lightning.Trainer(**kwargs)`` with :func:`quiet_third_party_console` in effect."""
    import pytorch_lightning as pl

    quiet_third_party_console()
    return pl.Trainer(**kwargs)
