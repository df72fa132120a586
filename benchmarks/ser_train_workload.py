"""A cached ``python train.py`` workload of the paper's size, built without running any model.

``write_cached_workload(root, clips, blocks, dim)`` writes under ``root``:

* ``data/morgan_emotional_speech_set/``: a MESS-like corpus (6 actors, ``clips`` tone clips of 0.1 s named
  ``<code>_SCR.wav``, ratings table ``Coded stimuli final.csv``), read by ``ser_data=mess`` as the real
  corpus is;
* ``cache/``: the feature cache holding random per-layer statistics (``blocks + 1`` layers x ``dim``) of
  every clip the run needs (the valence clips and the default bias tests' clips), keyed by the fingerprint
  of the configured upstream (a random wav2vec2 of ``blocks`` blocks of width ``dim``), plus the audio
  index records, so the run is warm: it builds no model and decodes no audio twice.

:func:`train_command` returns the overrides of ``python train.py`` for it: exactly the code path of
``python train.py 'lr=[1e-3,1e-4,1e-5]' ser_data=mess``, with the cache and data under ``root``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
ACTORS = ("F1", "F2", "F3", "M1", "M2", "M3")


def upstream_overrides(blocks: int, dim: int) -> list[str]:
    """A random wav2vec2 of ``blocks`` transformer blocks of width ``dim`` (``blocks + 1`` layers): 24 x 1024
    is wav2vec2-large's shape. Its weights are never built when every clip is cached."""
    return [
        "upstream=random_wav2vec2_base",
        f"+upstream.config.num_hidden_layers={blocks}",
        f"+upstream.config.hidden_size={dim}",
        f"+upstream.config.num_attention_heads={max(1, dim // 64)}",
        f"+upstream.config.intermediate_size={4 * dim}",
    ]


def train_command(root: Path, blocks: int = 24, dim: int = 1024, lrs: str = "[1e-3,1e-4,1e-5]") -> list[str]:
    """Overrides of ``python train.py`` for the workload under ``root`` (a run folder is added by the caller)."""
    return [
        f"lr={lrs}",
        "ser_data=mess",
        f"paths.data_root={root / 'data'}",
        f"paths.cache_dir={root / 'cache'}",
        *upstream_overrides(blocks, dim),
    ]


def write_mess_corpus(corpus: Path, clips: int, seed: int = 0) -> None:
    """``clips`` MESS-like tone clips (0.1 s, a distinct pitch each) over 6 actors and their ratings table."""
    rng = np.random.default_rng(seed)
    corpus.mkdir(parents=True, exist_ok=True)
    t = np.arange(1600) / 16000
    rows = []
    for i in range(clips):
        actor = ACTORS[i % len(ACTORS)]
        k = i // len(ACTORS)
        code = f"{'ACHS'[k % 4]}{actor}{'MTV'[k % 3]}{k + 1:03d}"
        wav = (0.1 * np.sin(2 * np.pi * (150 + 0.37 * i) * t)).astype(np.float32)
        sf.write(str(corpus / f"{code}_SCR.wav"), wav, 16000, subtype="FLOAT")
        rows.append(
            {
                "code": code,
                "Gender": actor[0],
                "Talker": actor[1],
                "Emotion": code[0],
                "Cue": "V",
                "Valence": float(np.round(rng.uniform(0, 100), 2)),
                "Arousal": float(rng.uniform(0, 100)),
            }
        )
    pd.DataFrame(rows).to_csv(corpus / "Coded stimuli final.csv", index=False)


def compose_run_parts(overrides: list[str]):
    """(upstream, valence set, bias tests) of ``python train.py <overrides>``, built as the run builds them."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import instantiate
    from omegaconf import open_dict

    import speechbias.launch.entry  # noqa: F401  (registers the project's config resolvers)
    from speechbias.run_context import register_choice_resolver

    register_choice_resolver()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"paths.root_dir={REPO}", *overrides], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    run = cfg.task.run
    return instantiate(run.upstream), instantiate(run.valence), instantiate(run.bias_tests)


def fill_cache(cache_dir: Path, fingerprint: str, paths: list[str], layers: int, dim: int, seed: int = 0) -> None:
    """Random per-layer statistics (``layers`` x ``dim``, float32) of every clip in ``paths`` under
    ``fingerprint``, and their audio index records, as extraction would have written them."""
    from speechbias.features.cache import ClipStatistics, FeatureCache
    from speechbias.fileio.audio import SAMPLE_RATE, audio_sha256, load_audio

    cache = FeatureCache(cache_dir)
    rng = np.random.default_rng(seed)
    for path in dict.fromkeys(paths):
        wav = load_audio(path, SAMPLE_RATE, min_samples=1)
        sha = audio_sha256(wav)
        cache.remember_audio(path, sha, wav.shape[0])
        if cache.has(fingerprint, sha):
            continue
        mean = rng.standard_normal((layers, dim), dtype=np.float32)
        cache.put(fingerprint, sha, ClipStatistics(mean=mean, min=mean - 1, max=mean + 1, n_frames=4))


def write_cached_workload(root: Path, clips: int = 1800, blocks: int = 24, dim: int = 1024) -> list[str]:
    """Writes the corpus and the warm cache under ``root``; returns :func:`train_command`'s overrides."""
    root = Path(root)
    write_mess_corpus(root / "data" / "morgan_emotional_speech_set", clips)
    overrides = train_command(root, blocks, dim)
    upstream, valence, bias_tests = compose_run_parts(overrides)
    if (upstream.num_layers, upstream.hidden_size) != (blocks + 1, dim):
        raise RuntimeError(f"the upstream has {upstream.num_layers} x {upstream.hidden_size}, not {blocks + 1} x {dim}")
    paths = list(valence.table["path"]) + [p for t in bias_tests for p in t.load()["path"]]
    fill_cache(root / "cache", upstream.fingerprint, paths, upstream.num_layers, upstream.hidden_size)
    return overrides
