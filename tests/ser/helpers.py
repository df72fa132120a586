"""Shared test helpers for the SER head: small valence sets on disk and train-config composition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from core.audio_fixtures import write_clip

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"


def write_valence_csv(
    root: Path, n_speakers: int = 4, per_speaker: int = 6, seed: int = 0, low: float = 0.0, high: float = 100.0
) -> Path:
    """Tone clips whose pitch rises with a made-up rating; returns the ratings CSV."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_speakers):
        for i in range(per_speaker):
            rating = float(rng.uniform(low, high))
            rel = f"clips/s{s}_{i}.wav"
            write_clip(root / rel, seconds=0.3 + 0.05 * i, freq=120 + 3 * rating, seed=100 * s + i)
            rows.append({"clip_id": f"s{s}_{i}", "path": rel, "speaker": f"spk{s}", "valence": rating})
    path = root / "valence.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def compose_train(overrides: list[str]):
    """Compose conf/train.yaml as ``python train.py`` would and register it as the Hydra config;
    the job config comes without its ``hydra`` node, as ``@hydra.main`` passes it to the task."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"paths.root_dir={REPO_ROOT}", *overrides], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg
