"""What a train.py run trains, as checked settings (no torch: the config checks build them before any
model or extraction; :mod:`speechbias.checked_settings`). :func:`learning_rates` is THE reading of ``lr``."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.errors import ConfigError
from speechbias.checked_settings import SEED, Accepts, Settings, boolean, choice, integer, number, setting, text

# the valence heads' training step (ser.heads_adam builds it; named here so that the check imports no torch)
STEP_KERNELS = ("auto", "compiled", "torch")


def learning_rates(value) -> tuple[float, ...]:
    """``1e-4``, ``"1e-4"`` or ``[1e-3, 1e-4, 1e-5]`` -> a tuple of distinct floats > 0; anything else
    raises :class:`~speechbias.errors.ConfigError` naming ``lr``."""
    return TrainingSettings(lr=value).lr


@dataclass(frozen=True)
class TrainingSettings(Settings):
    """train.py's top-level training keys (``torch_threads`` / ``fit_threads`` null: torch's own count)."""

    lr: tuple[float, ...] = setting(
        Accepts("floats", low=0, low_open=True, distinct=True),
        [1e-4],
        "Adam's learning rate, or a list: one head per rate, e.g. 'lr=[1e-3,1e-4,1e-5]'",
    )
    max_steps: int = setting(integer(1), 20_000, "optimiser steps (a valence set may give its own: ser_data.max_steps)")
    steps_per_call: int = setting(integer(1), 64, "optimiser steps per Lightning training call")
    checkpoint_every_n_epochs: int = setting(integer(1), 10, "epochs between last.ckpt writes")
    torch_threads: int | None = setting(integer(1, optional=True), None, "torch's CPU threads in this job")
    fit_threads: int | None = setting(integer(1, optional=True), 1, "torch's CPU threads while the heads train")


@dataclass(frozen=True)
class ValenceDataSettings(Settings):
    """``ser_data.*`` besides its ``source`` (the rated clips, built by their own loader); ``max_steps`` and
    ``torch_threads`` null: train.py's."""

    NODE = "ser_data"

    name: str = setting(text(), "valence", "the valence set's name")
    dev_fraction: float = setting(number(0, 1, low_open=True, high_open=True), 0.125, "share of clips held out")
    speaker_disjoint: bool = setting(boolean(), False, "hold out whole speakers")
    split_seed: int = setting(SEED, 0, "the dev split's seed")
    batch_size: int = setting(integer(1), 32, "clips per training batch")
    val_every_n_epochs: int = setting(integer(1), 1, "epochs between validations")
    num_workers: int = setting(integer(0), 0, "DataLoader worker processes")
    max_steps: int | None = setting(integer(1, optional=True), None, "the set's default max_steps")
    torch_threads: int | None = setting(integer(1, optional=True), None, "the set's default torch_threads")


@dataclass(frozen=True)
class ValenceSourceSettings(Settings):
    """``ser_data.source.*``: the keys of the valence set loaders (ser.valence), checked when the option has
    them (the files themselves: check_valence_source, then the loader's ValenceDataError)."""

    NODE = "ser_data.source"

    name: str | None = setting(text(optional=True), None, "the set's name")
    root: str | None = setting(text(optional=True), None, "the corpus folder")
    ratings: str | None = setting(text(optional=True), None, "the ratings CSV")
    low: float | None = setting(number(optional=True), None, "the rating scale's lowest value")
    high: float | None = setting(number(optional=True), None, "the rating scale's highest value")
    synthetic: bool = setting(boolean(), False, "the shipped synthetic set")

    def __post_init__(self):
        super().__post_init__()
        if self.low is not None and self.high is not None and not self.high > self.low:
            raise ConfigError(
                f"ser_data.source.low={self.low:g}, ser_data.source.high={self.high:g}: the rating scale's low "
                "must be below its high"
            )


@dataclass(frozen=True)
class HeadSettings(Settings):
    """``downstream.*``: the valence head's width and its training step (built by the head's own
    ``_target_``; checked here before any extraction)."""

    NODE = "downstream"

    hidden_size: int = setting(integer(1), 256, "the head's hidden width")
    step_kernel: str = setting(choice(*STEP_KERNELS), "auto", "auto: numba's step on a CPU where it can")


# the columns of a SpEAT results.csv that propagation.speat_results gives d from (checked before the run)
SPEAT_RESULTS_COLUMNS = ("test", "fingerprint", "aggregation", "d")


@dataclass(frozen=True)
class PropagationSettings(Settings):
    """``propagation.*`` besides its aggregation: an optional SpEAT results.csv to read d from."""

    NODE = "propagation"

    speat_results: str | None = setting(text(optional=True), None, "a SpEAT results.csv to read d from")
