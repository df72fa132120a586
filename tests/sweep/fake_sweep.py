"""Sweep folders written the way the SpEAT and SER runs write them, with made-up numbers, for fast
tests of collection, tables and figures without running any model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.report.run_writer import RunWriter

# the 16 models of the SpEAT paper: (display name, family, hub id, number of layers)
PAPER_MODELS = [
    ("wav2vec2-base", "wav2vec2", "facebook/wav2vec2-base", 13),
    ("wav2vec2-large", "wav2vec2", "facebook/wav2vec2-large", 25),
    ("wav2vec2-large-lv60", "wav2vec2", "facebook/wav2vec2-large-lv60", 25),
    ("hubert-base-ls960", "hubert", "facebook/hubert-base-ls960", 13),
    ("hubert-large-ll60k", "hubert", "facebook/hubert-large-ll60k", 25),
    ("hubert-xlarge-ll60k", "hubert", "facebook/hubert-xlarge-ll60k", 49),
    ("wavlm-base", "wavlm", "microsoft/wavlm-base", 13),
    ("wavlm-base-plus", "wavlm", "microsoft/wavlm-base-plus", 13),
    ("wavlm-large", "wavlm", "microsoft/wavlm-large", 25),
    ("whisper-base", "whisper", "openai/whisper-base", 7),
    ("whisper-base.en", "whisper", "openai/whisper-base.en", 7),
    ("whisper-small", "whisper", "openai/whisper-small", 13),
    ("whisper-small.en", "whisper", "openai/whisper-small.en", 13),
    ("whisper-medium", "whisper", "openai/whisper-medium", 25),
    ("whisper-medium.en", "whisper", "openai/whisper-medium.en", 25),
    ("whisper-large (v1)", "whisper", "openai/whisper-large", 33),
]
US_TESTS = {
    "abled_disabled": 0.45,
    "european_african_american": 0.37,
    "female_male": 0.31,
    "human_synthesized": 0.33,
    "us_foreign": 0.32,
    "young_old": 0.49,
}


def fake_d(i_model: int, i_test: int, aggregation: str = "mean_sum") -> float:
    """A deterministic made-up d in (-1.5, 1.5)."""
    return float(np.round(1.5 * np.sin(1.3 * i_model + 2.1 * i_test + 0.7 * len(aggregation)), 4))


def fake_p(d: float) -> float:
    return float(np.round(1.0 / (1.0 + np.exp(6.0 * d)), 6))


def write_speat_run(
    run_dir: Path,
    model,
    test: str,
    human,
    aggregation: str = "mean_sum",
    i_model: int = 0,
    i_test: int = 0,
    se_curve: bool = True,
    overrides: list[str] | None = None,
) -> dict:
    name, family, model_id, n_layers = model
    temporal, layer = aggregation.split("_", 1)
    d = fake_d(i_model, i_test, aggregation)
    row = {
        "upstream": name,
        "family": family,
        "model_id": model_id,
        "fingerprint": f"fp-{model_id}",
        "test": test,
        "aggregation": aggregation,
        "temporal": temporal,
        "layer": layer,
        "d": d,
        "p": fake_p(d),
        "n_x": 60,
        "n_y": 60,
        "n_a": 60,
        "n_b": 60,
        "n_permutations": 1000000,
        "exact": False,
        "seed": 0,
        "human_iat_d": human,
        "num_layers": n_layers,
        "mean_frames": 250.0,
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ".hydra").mkdir(exist_ok=True)
    ov = overrides or [f"upstream={name}", f"bias_test={test}", f"aggregation={aggregation}"]
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ov))
    layers = pd.DataFrame(
        {
            "upstream": name,
            "family": family,
            "test": test,
            "temporal": temporal,
            "layer": np.arange(n_layers),
            "d": np.round(d * np.cos(np.linspace(0, 2.5, n_layers) + i_test), 4),
            "p": 0.5,
        }
    )
    RunWriter(run_dir).table("layers", layers)
    if se_curve:
        sizes = np.arange(2, 61)
        se = pd.DataFrame(
            {
                "upstream": name,
                "test": test,
                "sizes": sizes,
                "se": np.round((0.9 + 0.05 * i_model) / np.sqrt(sizes), 5),
                "n_valid": 1000,
            }
        )
        RunWriter(run_dir).table("se_curve", se)
    RunWriter(run_dir).table("results", pd.DataFrame([row]))  # results last, as the SpEAT task does
    return row


def write_speat_sweep(
    sweep: Path, models=PAPER_MODELS, tests=US_TESTS, aggregations=("mean_sum",), se_curve: bool = True
) -> pd.DataFrame:
    rows = []
    for a in aggregations:
        for j, (test, human) in enumerate(tests.items()):
            for i, model in enumerate(models):
                run = sweep / f"aggregation={a},bias_test={test},upstream={model[0]}"
                rows.append(write_speat_run(run, model, test, human, a, i, j, se_curve))
    return pd.DataFrame(rows)


def fake_valence(i_model: int, i_test: int, lr: float, role: str, k: int) -> float:
    shift = 0.3 * np.sin(i_model + 3 * i_test + 10 * lr) + (0.2 if role == "X" else -0.1) * np.cos(i_model)
    return float(50 + 10 * np.sin(k * 0.7 + i_model) + 5 * shift)


def write_propagation_sweep(
    sweep: Path, models=PAPER_MODELS[:4], tests=tuple(US_TESTS)[:3], lrs=(1e-3, 1e-4, 1e-5), n_per_group: int = 6
) -> pd.DataFrame:
    """SER runs: per (model, lr) one folder with results.csv (one row per test) and predictions.csv."""
    all_preds = []
    for i, (name, family, _model_id, _) in enumerate(models):
        for lr in lrs:
            run = sweep / f"lr={lr},upstream={name}"
            (run / ".hydra").mkdir(parents=True, exist_ok=True)
            info = {"upstream": name, "family": family, "lr": lr, "seed": 0, "ser_data": "mess"}
            rows, preds = [], []
            for j, test in enumerate(tests):
                px = [fake_valence(i, j, lr, "X", k) for k in range(n_per_group)]
                py = [fake_valence(i, j, lr, "Y", k) for k in range(n_per_group)]
                pooled_sd = np.sqrt(
                    ((n_per_group - 1) * np.var(px, ddof=1) + (n_per_group - 1) * np.var(py, ddof=1))
                    / (2 * n_per_group - 2)
                )
                rows.append(
                    {
                        **info,
                        "test": test,
                        "n_x": n_per_group,
                        "n_y": n_per_group,
                        "cohens_d": (np.mean(px) - np.mean(py)) / pooled_sd,
                        "speat_d": fake_d(i, j),
                        "sign_agrees": True,
                    }
                )
                for role, vals in (("X", px), ("Y", py)):
                    for k, v in enumerate(vals):
                        preds.append(
                            {**info, "test": test, "clip_id": f"{test}_{role}{k}", "role": role, "predicted_valence": v}
                        )
            RunWriter(run).table("predictions", pd.DataFrame(preds))
            RunWriter(run).table("results", pd.DataFrame(rows))
            all_preds.append(pd.DataFrame(preds))
    return pd.concat(all_preds, ignore_index=True)
