"""The settings every run of both entry points has: the run's own keys (``seed``, ``force``, the audio
checks, ``model_id``) and its folders (``paths.*``), values checked on construction
(:mod:`speechbias.checked_settings`). Ground floor: no torch, no pandas."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.checked_settings import SEED, Settings, boolean, choice, setting, text
from speechbias.fileio.audio_index import CHECK_AUDIO_MODES


@dataclass(frozen=True)
class RunSettings(Settings):
    """The top-level keys of a run."""

    seed: int = setting(SEED, 0, "the seed of every random draw")
    force: bool = setting(boolean(), False, "rerun even when the run's results exist")
    check_audio: str = setting(choice(*CHECK_AUDIO_MODES), "changed", "which clips are decoded before a run")
    allow_duplicate_audio: bool = setting(boolean(), False, "run a manifest that lists the same audio twice")
    model_id: str | None = setting(text(optional=True), None, "upstream=hf's hub id or local folder")


@dataclass(frozen=True)
class PathSettings(Settings):
    """``paths.*`` (``paths.output_dir``, no field: Hydra's run folder, checked as writable before the run)."""

    NODE = "paths"

    root_dir: str = setting(text(), ".", "the project folder")
    data_root: str = setting(text(), "data", "the corpora's folder (env SPEECHBIAS_DATA, else <project>/data)")
    demo_dir: str = setting(text(), "experiments/demo", "the shipped demo data")
    cache_dir: str = setting(
        text(), ".cache/speechbias", "the feature cache (env SPEECHBIAS_CACHE, else <project>/.cache/speechbias)"
    )
    output_root: str = setting(text(), "outputs", "single runs' folders")
    multirun_root: str = setting(text(), "multirun", "sweeps' folders")
