"""Cohen's d of predicted valence per head and pooled over the three learning rates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.ser.pooling import pooled_propagation


def pooled_sd_d(x, y):
    """Cohen's d from its textbook formula (pooled SD with n - 1 denominators)."""
    nx, ny = len(x), len(y)
    sx2 = sum((v - sum(x) / nx) ** 2 for v in x) / (nx - 1)
    sy2 = sum((v - sum(y) / ny) ** 2 for v in y) / (ny - 1)
    sp = (((nx - 1) * sx2 + (ny - 1) * sy2) / (nx + ny - 2)) ** 0.5
    return (sum(x) / nx - sum(y) / ny) / sp


def _head(lr, shift, seed, upstream="m", test="t"):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(50 + shift, 5, 6), rng.normal(50, 5, 7)
    rows = [
        {
            "upstream": upstream,
            "test": test,
            "lr": lr,
            "role": r,
            "predicted_valence": v,
            "ser_data": "mess",
            "clip_id": f"{r}{i}",
        }
        for r, vals in (("X", x), ("Y", y))
        for i, v in enumerate(vals)
    ]
    return pd.DataFrame(rows), list(x), list(y)


def test_per_head_and_pooled_d_match_the_formula(tmp_path):
    heads = [_head(lr, shift, seed) for lr, shift, seed in ((1e-3, 4, 0), (1e-4, 1, 1), (1e-5, -2, 2))]
    paths = []
    for k, (df, _, _) in enumerate(heads):
        paths.append(tmp_path / f"run{k}" / "predictions.csv")
        paths[-1].parent.mkdir()
        df.to_csv(paths[-1], index=False)
    out = pooled_propagation(paths)
    assert list(out["lr"]) == ["1e-05", "0.0001", "0.001", "pooled"]
    for (_df, x, y), lr in zip(heads, (1e-3, 1e-4, 1e-5)):
        row = out[out["lr"] == str(lr)].iloc[0]
        assert row["n_heads"] == 1 and row["n_x"] == 6
        assert row["cohens_d"] == pytest.approx(pooled_sd_d(x, y), rel=1e-10)
    all_x = [v for _, x, _ in heads for v in x]
    all_y = [v for _, _, y in heads for v in y]
    pooled = out[out["lr"] == "pooled"].iloc[0]
    assert pooled["n_heads"] == 3 and pooled["n_x"] == 18 and pooled["n_y"] == 21
    assert pooled["cohens_d"] == pytest.approx(pooled_sd_d(all_x, all_y), rel=1e-10)
    # pooling is not the mean of the per-head d's
    assert pooled["cohens_d"] != pytest.approx(np.mean(out["cohens_d"][:3]), rel=1e-3)
    assert pooled["ci_low"] < pooled["cohens_d"] < pooled["ci_high"]


def test_groups_by_upstream_and_test():
    a, _, _ = _head(1e-3, 3, 0, upstream="a")
    b, _, _ = _head(1e-3, 3, 1, upstream="b")
    out = pooled_propagation([a, b])
    assert sorted(out["upstream"].unique()) == ["a", "b"] and len(out) == 4


def test_bad_tables_are_clear_errors():
    a, _, _ = _head(1e-3, 3, 0)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['ser_data'\]"):
        pooled_propagation([a.drop(columns="ser_data")])
    b, _, _ = _head(1e-4, 3, 1)
    b["ser_data"] = "eu_emotion"
    with pytest.raises(ValueError, match="different valence sets"):
        pooled_propagation([a, b])


def test_one_table_with_several_heads_counts_each_head():
    """One run that trained a head per learning rate writes them all into one predictions.csv; a
    sweep's collected table tells runs apart by ``run_dir``."""
    heads = [_head(lr, shift, seed) for lr, shift, seed in ((1e-3, 4, 0), (1e-4, 1, 1), (1e-5, -2, 2))]
    one_run = pd.concat([df for df, _, _ in heads], ignore_index=True)
    pooled = pooled_propagation([one_run]).set_index("lr").loc["pooled"]
    assert pooled["n_heads"] == 3
    all_x = [v for _, x, _ in heads for v in x]
    all_y = [v for _, _, y in heads for v in y]
    assert pooled["cohens_d"] == pytest.approx(pooled_sd_d(all_x, all_y), rel=1e-10)
    two_runs = pd.concat([heads[0][0].assign(run_dir="seed0"), heads[1][0].assign(run_dir="seed1", lr=1e-3)])
    assert pooled_propagation([two_runs]).set_index("lr").loc["pooled", "n_heads"] == 2
