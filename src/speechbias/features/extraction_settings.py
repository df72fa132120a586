"""The settings of a task's extraction loop (``extraction.*``), importable without torch or Lightning
(a task config builds them whether or not its run extracts anything); values checked on construction
(:mod:`speechbias.checked_settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.checked_settings import Settings, boolean, integer, number, setting
from speechbias.errors import ConfigError


@dataclass(frozen=True)
class ExtractionSettings(Settings):
    """``extraction.*``: a task's extraction loop. ``max_clip_seconds`` is checked before any model loads (one
    forward holds a whole clip); ``auto``: the longest clip whose predicted peak fits ``memory_gib`` or, when
    null, the host's or GPU's memory (:mod:`speechbias.features.clip_memory`)."""

    NODE = "extraction"

    batch_size: int = setting(integer(1), 8, "clips per forward")
    num_workers: int = setting(integer(0), 0, "DataLoader worker processes")
    pad_short: bool = setting(boolean(), False, "zero-pad clips shorter than the receptive field")
    max_clip_seconds: float | str = setting(
        number(0, low_open=True, words=("auto",)), "auto", "longest clip a run takes, in seconds"
    )
    memory_gib: float | None = setting(
        number(0, low_open=True, optional=True), None, "memory the auto clip limit is derived from, in GiB"
    )

    @classmethod
    def from_config(cls, cfg):
        """As :meth:`Settings.from_config`; an accelerator with no default batch size is named as typed
        (``trainer.accelerator=mps`` leaves ``extraction.batch_size``'s interpolation nothing to pick)."""
        from omegaconf import DictConfig, OmegaConf

        accelerator = OmegaConf.select(cfg, "trainer.accelerator", default=None)
        defaults = OmegaConf.select(cfg, "extraction.batch_size_per_accelerator", default=None)
        node = OmegaConf.select(cfg, "extraction", default=None)
        picks = isinstance(node, DictConfig) and "batch_size" in node and OmegaConf.is_interpolation(node, "batch_size")
        if picks and isinstance(defaults, DictConfig) and isinstance(accelerator, str) and accelerator not in defaults:
            raise ConfigError(
                f"trainer.accelerator={accelerator}: no default extraction.batch_size for it "
                f"(extraction.batch_size_per_accelerator has {', '.join(map(str, defaults))}); "
                f"give extraction.batch_size=N"
            )
        return super().from_config(cfg)

    def kwargs(self) -> dict:
        """As keyword arguments of :func:`speechbias.features.extraction.extract_statistics`."""
        return {"batch_size": self.batch_size, "num_workers": self.num_workers, "pad_short": self.pad_short}


@dataclass(frozen=True)
class BatchSizePerAccelerator(Settings):
    """``extraction.batch_size_per_accelerator``: the default ``extraction.batch_size`` of each accelerator
    (checked only: ``extraction.batch_size`` picks one of them by interpolation)."""

    NODE = "extraction.batch_size_per_accelerator"

    cpu: int = setting(integer(1), 2, "clips per forward on a CPU")
    gpu: int = setting(integer(1), 8, "clips per forward on a GPU")
