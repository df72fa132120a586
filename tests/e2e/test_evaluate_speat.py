"""`python evaluate.py` end to end: offline default, tiny models of every family, warm cache, W&B offline."""

from __future__ import annotations

import json
import math
import re
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.launch.entry import run_task

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "stats"))
from speat_reference import d_ref  # noqa: E402


def _compose(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(
            "evaluate",
            overrides=[
                f"paths.output_dir={tmp_path / 'out'}",
                f"paths.cache_dir={tmp_path / 'cache'}",
                f"paths.root_dir={REPO}",
                "logger=none",
                "trainer.enable_progress_bar=false",
                *overrides,
            ],
        )


def test_default_run_in_a_subprocess(tmp_path):
    """The README's offline default: no overrides but where outputs and the cache go."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "evaluate.py", f"hydra.run.dir={tmp_path / 'run'}", "speat.n_permutations=20000"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    res = pd.read_csv(run / "results.csv")
    assert res.loc[0, "test"] == "demo_voice" and res.loc[0, "upstream"] == "fbank"
    assert res.loc[0, "n_x"] == 10 and res.loc[0, "n_a"] == 10 and 0 < res.loc[0, "p"] <= 1
    report = (run / "report.md").read_text()
    assert "synthetic" in report and re.search(r"\|\s*d\s*\|\s*p\s*\|", report)
    # fbank has one layer: no one-point layer profile, and report.md says why in one line
    assert not (run / "layer_profile.png").exists() and "single layer" in report
    assert json.loads((run / "results.json").read_text())[0]["d"] == pytest.approx(res.loc[0, "d"])
    assert list(run.glob("wandb/offline-run-*")), "logger=wandb (default) must leave an offline run"


def _independent_d(manifest: pd.DataFrame, cache_dir: Path, fingerprint: str) -> float:
    """SpEAT d from the cached float32 layer means, in float64 with plain loops: each clip's vector is
    the exactly rounded (math.fsum) sum over layers, then s(w) and d from tests/stats/speat_reference.py."""
    from speechbias.features.cache import FeatureCache

    cache = FeatureCache(cache_dir)
    emb = {}
    for _, row in manifest.iterrows():
        sha = cache.lookup_audio(row["path"])[0]
        per_layer = cache.get(fingerprint, sha).mean.tolist()  # (L, D) as Python floats (exact)
        emb.setdefault(row["role"], []).append([math.fsum(column) for column in zip(*per_layer)])
    return d_ref(emb["X"], emb["Y"], emb["A"], emb["B"])


@pytest.mark.parametrize("upstream", ["tiny_wav2vec2", "tiny_hubert", "tiny_wavlm", "tiny_whisper", "mfcc"])
def test_every_family_end_to_end_and_warm_rerun(tmp_path, upstream):
    cfg = _compose(
        tmp_path, f"upstream={upstream}", "bias_test=demo_accent", "speat.n_permutations=2000", "speat.per_layer=false"
    )
    first = run_task(cfg)
    res = pd.read_csv(tmp_path / "out" / "results.csv")
    assert first["n_upstream_forwards"] == 40
    from speechbias.stimuli import load_manifest

    m = load_manifest(REPO / "experiments/demo/demo_accent.csv")
    # float64 statistics: the engine matches a float64 loop to rounding, whatever the machine's BLAS
    assert res.loc[0, "d"] == pytest.approx(
        _independent_d(m, tmp_path / "cache", res.loc[0, "fingerprint"]), rel=1e-10, abs=1e-12
    )
    again = run_task(
        _compose(
            tmp_path,
            f"upstream={upstream}",
            "bias_test=demo_accent",
            "speat.n_permutations=2000",
            "speat.per_layer=false",
            "force=true",
        )
    )
    assert again["n_upstream_forwards"] == 0
    assert again["d"] == pytest.approx(first["d"], abs=1e-12)


def test_existing_results_are_not_recomputed(tmp_path):
    cfg = _compose(tmp_path, "speat.n_permutations=1000", "speat.per_layer=false")
    run_task(cfg)
    report = tmp_path / "out" / "report.md"
    written = report.stat().st_mtime_ns
    run_task(cfg)  # skipped: every output the digest records verifies and force=false
    assert report.stat().st_mtime_ns == written
    report.unlink()
    run_task(cfg)  # an output missing: recomputed
    assert report.is_file()


@pytest.mark.slow
def test_two_process_ddp_extraction_matches_single_process(tmp_path):
    """trainer=ddp_sim (2 CPU processes, gloo) shards extraction; the cache gathers it; d is unchanged."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", SPEECHBIAS_CACHE=str(tmp_path / "cache_ddp"))
    common = ["logger=none", "speat.n_permutations=5000", "speat.per_layer=false", "bias_test=demo_accent"]
    proc = subprocess.run(
        [sys.executable, "evaluate.py", "trainer=ddp_sim", f"hydra.run.dir={tmp_path / 'ddp'}", *common],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    single = run_task(_compose(tmp_path, *common[1:]))
    ddp = pd.read_csv(tmp_path / "ddp" / "results.csv").iloc[0]
    assert ddp["n_upstream_forwards"] >= 40
    assert ddp["d"] == pytest.approx(single["d"], abs=1e-9) and ddp["p"] == pytest.approx(single["p"])


def test_se_curve_uses_the_tests_resampling_design(tmp_path):
    cfg = _compose(
        tmp_path, "speat.se_curve=true", "speat.n_resamples=500", "speat.n_permutations=1000", "speat.per_layer=false"
    )
    summary = run_task(cfg)
    curve = pd.read_csv(tmp_path / "out" / "se_curve.csv")
    assert list(curve["n"]) == list(range(2, 11))  # 10 pairs in demo_voice
    assert set(curve["design"]) == {"paired"} and (curve["se"] > 0).all()
    assert curve["se"].iloc[-1] < curve["se"].iloc[0]  # more stimuli, smaller standard error
    assert summary["ci_low"] < summary["d"] < summary["ci_high"]


def test_tracker_gets_the_speat_metrics_tables_and_figure_once(tmp_path, wandb_recorder):
    """logger=wandb: one W&B run named upstream/test/aggregation, logged from the writer's record."""
    started, logged = wandb_recorder
    summary = run_task(_compose(tmp_path, "logger=wandb", "speat.n_permutations=500"))
    assert len(started) == 1 and started[0]["name"] == "fbank/demo_voice/mean_sum"
    assert started[0]["job_type"] == "speat" and started[0]["tags"][:2] == ["fbank", "classical"]
    assert started[0]["config"]["speat"]["n_permutations"] == 500
    metrics = [e[1] for e in logged if e[0] == "metrics"]
    assert metrics == [{"speat/demo_voice/d": summary["d"], "speat/demo_voice/p": summary["p"]}]
    assert sorted(e[1] for e in logged if e[0] == "table") == ["speat/demo_voice/layers", "speat/demo_voice/results"]
    assert [e[1] for e in logged if e[0] == "images"] == []  # fbank: one layer, no layer profile
    assert logged[-1] == ("finish",)
