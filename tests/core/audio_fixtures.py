"""Generate small audio files for tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf


def tone(seconds: float, sr: int = 16_000, freq: float = 220.0, seed: int = 0, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(t.shape)
    if channels > 1:
        x = np.stack([x * (c + 1) / channels for c in range(channels)], axis=1)
    return x.astype(np.float32)


def write_clip(path: Path, seconds: float = 0.5, sr: int = 16_000, freq: float = 220.0, seed: int = 0,
               fmt: str | None = None, channels: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), tone(seconds, sr, freq, seed, channels), sr, format=fmt)
    return path


def write_manifest_tree(root: Path, n_per_role: int = 4, seed: int = 0) -> Path:
    """A bias-test folder: clips for X, Y, A, B with varied lengths and a manifest.csv."""
    import pandas as pd

    rows = []
    rng = np.random.default_rng(seed)
    for r_i, role in enumerate("XYAB"):
        for i in range(n_per_role):
            rel = f"clips/{role}_{i}.wav"
            secs = float(rng.uniform(0.2, 0.6))
            write_clip(root / rel, seconds=secs, freq=150 + 60 * r_i + 7 * i, seed=seed + 10 * r_i + i)
            rows.append({"clip_id": f"{role}{i}", "path": rel, "role": role, "group": role, "speaker": f"s{i}",
                         "pair_id": f"p{i}" if role in "XY" else "", "stratum": ""})
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"
