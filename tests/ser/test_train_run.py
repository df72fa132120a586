"""``python train.py`` end to end on the offline demo (weight-free fbank upstream, shipped valence set)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hydra.errors import InstantiationException

from ser.helpers import compose_train, write_valence_csv
from speechbias.launch.entry import run_task
from speechbias.report.caveat import DEMO_CAVEAT


def _cfg(tmp_path, *extra):
    return compose_train(
        [
            f"paths.output_dir={tmp_path / 'run'}",
            f"paths.cache_dir={tmp_path / 'cache'}",
            "logger=none",
            "max_steps=40",
            "ser_data.val_every_n_epochs=4",
            "++trainer.enable_progress_bar=false",
            *extra,
        ]
    )


def pooled_sd_d(x, y):
    nx, ny = len(x), len(y)
    sp = np.sqrt(((nx - 1) * np.var(x, ddof=1) + (ny - 1) * np.var(y, ddof=1)) / (nx + ny - 2))
    return (np.mean(x) - np.mean(y)) / sp


def test_demo_run_writes_propagation_results(tmp_path):
    summary = run_task(_cfg(tmp_path))
    out = tmp_path / "run"
    for name in (
        "results.csv",
        "results.json",
        "predictions.csv",
        "layer_weights.csv",
        "dev_curve.csv",
        "report.md",
        "dev_r2.png",
        "propagation_demo_voice.png",
        "checkpoints/best.ckpt",
        "checkpoints/last.ckpt",
        "config.yaml",
    ):
        assert (out / name).is_file(), name
    # fbank has one layer: no one-bar layer-weight figure, and report.md says why
    assert not (out / "layer_weights.png").exists() and "single layer" in (out / "report.md").read_text()
    results = pd.read_csv(out / "results.csv")
    assert list(results["test"]) == ["demo_voice", "demo_accent"]
    assert (results["upstream"] == "fbank").all() and (results["lr"] == 1e-4).all()
    assert (results["n_x"] == 10).all() and (results["n_train"] + results["n_dev"] == 48).all()
    preds = pd.read_csv(out / "predictions.csv")
    for r in results.itertuples():  # Cohen's d recomputed from the per-clip predictions
        p = preds[preds["test"] == r.test]
        d = pooled_sd_d(p.loc[p["role"] == "X", "predicted_valence"], p.loc[p["role"] == "Y", "predicted_valence"])
        assert r.cohens_d == pytest.approx(d, rel=1e-9)
        assert r.sign_agrees == (np.sign(r.cohens_d) == np.sign(r.speat_d))
        assert summary[f"propagation/{r.test}/cohens_d"] == pytest.approx(r.cohens_d)
    curve = pd.read_csv(out / "dev_curve.csv")
    assert list(curve["step"]) == [8, 16, 24, 32, 40] and (curve["n_dev"] == 6).all()
    assert summary["ser/val/r2"] == pytest.approx(curve.loc[curve["mse"].idxmin(), "r2"])
    weights = pd.read_csv(out / "layer_weights.csv")
    assert weights["weight"].sum() == pytest.approx(1.0) and len(weights) == 1  # fbank: one layer
    report = (out / "report.md").read_text()
    assert DEMO_CAVEAT in report and "Cohen's d" in report
    # a second run finds the results and does nothing; a forced rerun uses the warm cache
    again = run_task(_cfg(tmp_path))
    assert again["propagation/demo_voice/cohens_d"] == pytest.approx(summary["propagation/demo_voice/cohens_d"])


def test_speaker_disjoint_split_and_custom_set(tmp_path):
    csv = write_valence_csv(tmp_path / "data", n_speakers=4, per_speaker=8)
    cfg = _cfg(
        tmp_path,
        f"ser_data.source.ratings={csv}",
        "ser_data.source.synthetic=false",
        "ser_data.speaker_disjoint=true",
        "bias_tests=[demo_voice]",
        "lr=1e-3",
    )
    summary = run_task(cfg)
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert results["n_dev"].iloc[0] == 8 and results["n_train"].iloc[0] == 24  # one of four speakers
    assert summary["n_upstream_forwards"] == 32 + 40  # training clips + the test's X, Y, A, B clips


def test_unknown_bias_test_is_a_clear_error(tmp_path):
    # the bias tests are built with the task (Hydra wraps the loader's error, naming the key)
    with pytest.raises(InstantiationException, match="task.run.bias_tests") as raised:
        run_task(_cfg(tmp_path, "bias_tests=[nope]"))
    cause = raised.value.__cause__
    assert isinstance(cause, ValueError) and re.search("no bias test 'nope'.*known: .*demo_voice", str(cause))


def test_same_seed_and_config_give_the_same_numbers(tmp_path):
    a = run_task(_cfg(tmp_path / "a", "max_steps=16", "bias_tests=[demo_voice]"))
    b = run_task(_cfg(tmp_path / "b", "max_steps=16", "bias_tests=[demo_voice]"))
    assert a["propagation/demo_voice/cohens_d"] == b["propagation/demo_voice/cohens_d"]
    pa = pd.read_csv(tmp_path / "a" / "run" / "predictions.csv")["predicted_valence"]
    pb = pd.read_csv(tmp_path / "b" / "run" / "predictions.csv")["predicted_valence"]
    np.testing.assert_array_equal(pa.to_numpy(), pb.to_numpy())


def test_three_learning_rates_in_one_run_with_the_pooled_figure(tmp_path):
    summary = run_task(_cfg(tmp_path, "lr=[1e-3,1e-4,1e-5]", "max_steps=16"))
    out = tmp_path / "run"
    results = pd.read_csv(out / "results.csv")
    assert sorted(results["lr"].unique()) == [1e-5, 1e-4, 1e-3] and len(results) == 3 * 2
    preds = pd.read_csv(out / "predictions.csv")
    assert len(preds) == 3 * 2 * 20  # heads x tests x (10 X + 10 Y)
    curve = pd.read_csv(out / "dev_curve.csv")
    pooled = pd.read_csv(out / "pooled.csv")
    assert list(pooled["test"]) == ["demo_voice", "demo_accent"] and (pooled["n_heads"] == 3).all()
    for r in pooled.itertuples():  # every head's X predictions against every head's Y predictions
        p = preds[preds["test"] == r.test]
        d = pooled_sd_d(p.loc[p["role"] == "X", "predicted_valence"], p.loc[p["role"] == "Y", "predicted_valence"])
        assert r.cohens_d == pytest.approx(d, rel=1e-9) and r.n_x == 30
        assert summary[f"propagation/{r.test}/cohens_d"] == pytest.approx(d, rel=1e-9)
    for r in results.itertuples():
        p = preds[(preds["test"] == r.test) & (preds["lr"] == r.lr)]
        d = pooled_sd_d(p.loc[p["role"] == "X", "predicted_valence"], p.loc[p["role"] == "Y", "predicted_valence"])
        assert r.cohens_d == pytest.approx(d, rel=1e-9)
        key = f"propagation/{r.test}/cohens_d/lr={ {1e-3: '1e-3', 1e-4: '1e-4', 1e-5: '1e-5'}[r.lr] }"
        assert summary[key] == pytest.approx(d, rel=1e-9)
        mine = curve[curve["lr"] == r.lr]
        assert r.best_dev_mse == pytest.approx(mine["mse"].min()) and list(mine["step"]) == [8, 16]
    weights = pd.read_csv(out / "layer_weights.csv")
    assert weights.groupby("lr")["weight"].sum().tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert "3 heads pooled" in (out / "report.md").read_text()
    # the one-rate run with the same seed trains the same 1e-4 head
    single = run_task(_cfg(tmp_path / "single", "lr=1e-4", "max_steps=16"))
    assert single["propagation/demo_voice/cohens_d"] == pytest.approx(
        summary["propagation/demo_voice/cohens_d/lr=1e-4"], rel=1e-12
    )  # bit for bit, up to the CSV round trip
    again = run_task(_cfg(tmp_path, "lr=[1e-3,1e-4,1e-5]", "max_steps=16"))  # finished: read back
    assert again["propagation/demo_voice/cohens_d"] == pytest.approx(summary["propagation/demo_voice/cohens_d"])


def test_tracker_gets_the_dev_curve_summary_tables_and_figures_once(tmp_path, wandb_recorder):
    """logger=wandb: one W&B run, started with the Trainer (the losses logged live, each with the trainer's
    global step), then described and logged from the writer's record: each validation's dev metrics
    (``trainer/step`` first), the summary with each test's SpEAT d, the tables and the figures."""
    started, logged = wandb_recorder
    summary = run_task(_cfg(tmp_path, "logger=wandb", "lr=[1e-3,1e-4]", "max_steps=16"))
    out = tmp_path / "run"
    assert len(started) == 1 and started[0]["run_id"] == (out / "wandb_run_id").read_text().strip()
    assert started[0]["job_type"] == "train_ser"
    [(_, described)] = [e for e in logged if e[0] == "describe"]
    assert described["name"] == "fbank/valence/lr=1e-3,1e-4"
    assert described["tags"] == ["fbank", "classical", "ser", "demo"] and described["config"]["lr"] == [1e-3, 1e-4]
    live = [e for e in logged if e[0] == "metrics" and "trainer/global_step" in e[1]]
    assert live and logged.index(live[-1]) < logged.index(("describe", described))  # while training
    assert any("ser/val/r2/lr=1e-3" in m for _, m, _ in live)
    logged[:] = logged[logged.index(("describe", described)) + 1 :]  # what the writer recorded, below
    curve = pd.read_csv(out / "dev_curve.csv")
    expected = []
    for step, g in curve.groupby("step"):
        entry = {"trainer/step": int(step)}
        for r in g.itertuples():
            label = {1e-3: "1e-3", 1e-4: "1e-4"}[r.lr]
            entry |= {f"ser/val/r2/lr={label}": r.r2, f"ser/val/mse/lr={label}": r.mse}
        expected.append((int(step), list(entry.items())))
    # the dev curve reached the run live, each validation at the optimiser step of dev_curve.csv (not
    # Lightning's count of batches, each a chunk of several steps): not replayed at the end
    live_dev = [m for _, m, _ in live if "ser/val/r2/lr=1e-3" in m]
    assert [m["trainer/global_step"] for m in live_dev] == [s for s, _ in expected]
    metrics = [e for e in logged if e[0] == "metrics"]
    assert len(metrics) == 1 and all(s is None for *_, s in metrics)
    results = pd.read_csv(out / "results.csv")
    speat = {f"propagation/{t}/speat_d": d for t, d in results.groupby("test", sort=False)["speat_d"].first().items()}
    assert metrics[-1][1] == {k: v for k, v in summary.items() if k != "n_upstream_forwards"} | speat
    assert sorted(e[1] for e in logged if e[0] == "table") == [
        "propagation/pooled",
        "propagation/results",
        "ser/dev_curve",
        "ser/layer_weights",
    ]
    assert sorted(k for e in logged if e[0] == "images" for k in e[1]) == [
        "propagation/demo_accent/predictions",
        "propagation/demo_voice/predictions",
        "ser/dev_r2",
    ]
    assert logged[-1] == ("finish",)
    run_task(_cfg(tmp_path, "logger=wandb", "lr=[1e-3,1e-4]", "max_steps=16"))  # finished: nothing logged again
    assert len(started) == 1
