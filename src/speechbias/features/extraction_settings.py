"""The settings of a task's extraction loop (``extraction.*``), importable without torch or Lightning
(a task config builds them whether or not its run extracts anything)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExtractionSettings:
    """The extraction predict loop of a task (``extraction.*``): clips per batch, DataLoader workers,
    and whether clips shorter than the upstream's receptive field are zero-padded (else an error)."""

    batch_size: int = 8
    num_workers: int = 0
    pad_short: bool = False

    def kwargs(self) -> dict:
        """As keyword arguments of :func:`speechbias.features.extraction.extract_statistics`."""
        return {
            "batch_size": int(self.batch_size),
            "num_workers": int(self.num_workers),
            "pad_short": bool(self.pad_short),
        }
