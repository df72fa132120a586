"""The Spoken StereoSet task's config checks (``task=spoken_stereoset``): its settings and its data folder's layout."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.tasks.input_checks import check_cache_folder
from speechbias.tasks.spoken_stereoset_settings import SETTINGS as SETTINGS, TASK_SETTINGS as TASK_SETTINGS  # launch/'s


def check_config(cfg: DictConfig) -> None:
    """After its settings (``SETTINGS``), built by the config checks: the cache folder takes files;
    ``task.data_dir`` (when given) has the metadata of each domain."""
    check_cache_folder(cfg)
    check_spoken_stereoset_data(cfg)


def check_spoken_stereoset_data(cfg: DictConfig) -> None:
    """``task.data_dir`` holds the metadata CSV of each domain (``metadata/<domain>_<version>.csv``)."""
    data_dir = OmegaConf.select(cfg, "task.data_dir", default=None)
    if not data_dir:
        return
    folder = Path(str(data_dir)).expanduser()
    layout = "metadata/<domain>_<version>.csv and speech/<domain>/<id>_<speaker>.wav"
    if not folder.is_dir():
        raise ConfigError(
            f"task.data_dir={data_dir}: no such folder; give the Spoken StereoSet folder ({layout}), "
            "see experiments/spoken_stereoset_2024/README.md"
        )
    version = OmegaConf.select(cfg, "task.version", default="v1.0")
    domains = OmegaConf.select(cfg, "task.domains", default=None) or []
    missing = [
        f"metadata/{d}_{version}.csv" for d in domains if not (folder / "metadata" / f"{d}_{version}.csv").is_file()
    ]
    if missing:
        raise ConfigError(
            f"task.data_dir={data_dir}: {', '.join(missing)} not found; expected the layout {layout} "
            "(or choose task.domains=... / task.version=...)"
        )
