"""The s3prl adapter, against the real s3prl where it imports and a test double where it does not.

The real package runs in CI's s3prl venv (``.ci/s3prl.sh``): weight-free ``fbank``/``mfcc`` and
s3prl's ``hf_wav2vec2_custom``/``hf_hubert_custom`` on tiny local checkpoints, compared with the HF
path on the same weights. Without the extra (the main venv) those tests skip and the adapter runs on
the double of ``s3prl_support.py``, whose ``S3PRLUpstream`` is checked here against the real one (same
expert, same outputs) wherever s3prl imports. Expected values come from the frame formulas and from
per-clip computations, not from the adapter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from speechbias.run_context import upstream_info
from speechbias.upstream.randomize import bake_parametrized_weights
from speechbias.upstream.s3prl import S3PRLUpstream, S3PRLUpstreamError, s3prl_frame_mismatch
from speechbias.upstream.s3prl_import import S3PRLUnavailableError, provide_removed_torchaudio_apis
from speechbias.errors import error_line
from upstream.s3prl_support import (
    FAKE_HUB,
    RATE,
    WINDOW,
    WIDTH,
    FakeS3PRLUpstream,
    fake_frames,
    install_fake_s3prl,
    save_tiny_hf_checkpoint,
)
from upstream.tiny_models import random_wavs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _real_s3prl_nn():
    """The real ``s3prl.nn`` (with the torchaudio stand-ins the adapter adds), or None."""
    try:
        from speechbias.upstream.s3prl_import import import_s3prl_nn

        module = import_s3prl_nn()
    except S3PRLUnavailableError:
        return None
    return module if module.S3PRLUpstream is not FakeS3PRLUpstream else None


REAL = _real_s3prl_nn()
needs_real = pytest.mark.skipif(REAL is None, reason="s3prl does not import here (CI runs it in .ci/s3prl.sh)")


@pytest.fixture(params=["fake", "real"])
def s3prl_nn(request, monkeypatch):
    """``s3prl.nn`` with the FakeExpert entries of FAKE_HUB: the double, or the real package with the
    entries registered in its hub (its own S3PRLUpstream around them)."""
    if request.param == "fake":
        return install_fake_s3prl(monkeypatch)
    if REAL is None:
        pytest.skip("s3prl does not import here")
    register_fakes_in_real_hub(monkeypatch)
    return REAL


def register_fakes_in_real_hub(monkeypatch) -> None:
    import s3prl.hub

    for name, factory in FAKE_HUB.items():
        monkeypatch.setattr(s3prl.hub, name, factory, raising=False)


def s3prl_len(n: int, rate: int = RATE) -> int:
    """s3prl's hs_len: (n - 1) // rate + 1."""
    return (n - 1) // rate + 1


def computed_len(n: int, rate: int = RATE, window: int = WINDOW) -> int:
    """Frames a model with this window and stride computes for n samples."""
    return (n - window) // rate + 1


# --- the double is s3prl ---------------------------------------------------------------------------


def test_double_counts_and_pads_like_s3prl():
    """hs_len = (n - 1) // rate + 1 (50 frames for 16,000 samples where 49 were computed), the missing
    frames copies of the last one."""
    up = FakeS3PRLUpstream("fake_hubert")
    assert up.training, "s3prl leaves the upstream in train mode after its probe"
    wavs, lens = random_wavs([16_000, 12_345], seed=4)
    all_hs, all_lens = up(wavs, lens)
    assert all_lens[0].tolist() == [50, 39] and [computed_len(n) for n in (16_000, 12_345)] == [49, 38]
    assert all_hs[0].shape[1] == 50
    torch.testing.assert_close(all_hs[0][0, 49], all_hs[0][0, 48])  # clip 1: frame 49 repeats frame 48
    alone_hs, alone_lens = up(wavs[1:, :12_345], lens[1:])
    assert alone_lens[1].tolist() == [39] and alone_hs[1].shape[1] == 39
    torch.testing.assert_close(alone_hs[1][0, 38], alone_hs[1][0, 37])


@needs_real
def test_double_matches_the_real_s3prl_upstream(monkeypatch):
    """Same expert in the real ``S3PRLUpstream`` and in the double: same layers, rates, outputs, hs_len."""
    register_fakes_in_real_hub(monkeypatch)
    lengths = [16_000, 12_345, 4_000]
    wavs, lens = random_wavs(lengths, seed=5)
    real = REAL.S3PRLUpstream("fake_hubert")
    double = FakeS3PRLUpstream("fake_hubert")
    double.upstream.load_state_dict(real.upstream.state_dict())
    assert (real.num_layers, real.hidden_sizes, real.downsample_rates) == (
        double.num_layers,
        double.hidden_sizes,
        double.downsample_rates,
    )
    assert real.training == double.training
    with torch.no_grad():
        (real_hs, real_lens), (fake_hs, fake_lens) = real(wavs, lens), double(wavs, lens)
    for a, b in zip(real_hs, fake_hs):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for a, b in zip(real_lens, fake_lens):
        assert a.tolist() == b.tolist() == [s3prl_len(n) for n in lengths]


# --- the adapter on the expert (double or real s3prl) ---------------------------------------------


def test_valid_frames_are_the_computed_ones_not_s3prls_padding(s3prl_nn):
    up = S3PRLUpstream("fake_hubert")
    assert (up.num_layers, up.hidden_size, up.frame_rate, up.family) == (2, WIDTH, 50.0, "s3prl")
    assert not up.model.training and not up.model.upstream.training
    lengths = [4_000, 1_000, 2_345, 16_000]
    wavs, lens = random_wavs(lengths, seed=12)
    states, frame_lengths = up(wavs, lens)
    assert frame_lengths.tolist() == [computed_len(n) for n in lengths] == [12, 2, 7, 49]
    assert all(computed_len(n) < s3prl_len(n) for n in lengths)  # s3prl would count a copied frame
    expert = up.model.upstream
    for row, n in enumerate(lengths):
        t = computed_len(n)
        expected0 = fake_frames(wavs[row, :n])
        torch.testing.assert_close(states[0][row, :t], expected0)
        torch.testing.assert_close(states[1][row, :t], expert.layer1(expected0))
        assert torch.all(states[0][row, t:] == 0) and torch.all(states[1][row, t:] == 0)
    assert states[0].shape == (4, 49, WIDTH)


def test_a_model_off_s3prls_frame_rate_is_one_line(s3prl_nn):
    """A model striding 10 samples while s3prl declares 320 (s3prl itself: AssertionError in _match_length)."""
    up = S3PRLUpstream("fake_stride10")
    wavs, lens = random_wavs([6_000], seed=2)
    with pytest.raises(S3PRLUpstreamError) as caught:
        up(wavs, lens)
    line = error_line(caught.value)
    assert "\n" not in line and "561 frames" in line and "one frame per 320 samples (19 frames)" in line
    assert "upstream=hf model_id=" in line


def test_frame_mismatch_tolerates_only_a_receptive_field():
    assert not s3prl_frame_mismatch(49, 16_000, 320) and not s3prl_frame_mismatch(98, 16_000, 160)
    assert s3prl_frame_mismatch(45, 16_000, 320)  # 5 frames short of 50: another frame rate
    assert s3prl_frame_mismatch(33_000 // 352, 33_000, 320)  # a 352-sample stride over 2 s
    assert not s3prl_frame_mismatch(1_490, 480_000, 320)  # 1,500 counted, 10 short (< 2 %) on a 30 s clip


def test_clips_shorter_than_s3prls_minimum_are_rejected(s3prl_nn):
    up = S3PRLUpstream("fake_hubert", min_samples=400)
    assert up.min_samples == 800  # s3prl would zero-pad shorter clips
    wavs, lens = random_wavs([700], seed=1)
    with pytest.raises(ValueError, match="700.*800"):
        up(wavs, lens)


def test_names_and_fingerprints_tell_upstreams_apart(s3prl_nn, tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.pt").write_bytes(b"weights-1")
    a = S3PRLUpstream("fake_hubert")
    b = S3PRLUpstream("fake_wavlm")
    c = S3PRLUpstream("fake_hubert", path_or_url=str(ckpt))
    assert a.name == "s3prl:fake_hubert" and c.name == f"s3prl:fake_hubert@{ckpt}"
    assert len({a.fingerprint, b.fingerprint, c.fingerprint}) == 3
    info = upstream_info(b, name="s3prl")  # a run's upstream column: not the config option 's3prl'
    assert info["upstream"] == "s3prl:fake_wavlm" and info["model_id"] == "s3prl:fake_wavlm"
    assert S3PRLUpstream("fake_hubert", display_name="mine").fingerprint == a.fingerprint
    assert S3PRLUpstream("fake_hubert", extra_conf={"a": 1}).fingerprint != a.fingerprint
    before = c.fingerprint
    time.sleep(0.01)
    (ckpt / "model.pt").write_bytes(b"weights-2, longer")
    assert S3PRLUpstream("fake_hubert", path_or_url=str(ckpt)).fingerprint != before, "weights changed"
    single = tmp_path / "single.ckpt"
    single.write_bytes(b"w")
    assert S3PRLUpstream("fake_hubert", path_or_url=str(single)).fingerprint_fields()["local_files"][0][:2] == [
        "single.ckpt",
        1,
    ]


def test_eval_lock(s3prl_nn):
    up = S3PRLUpstream("fake_hubert")
    up.train()
    assert not up.training and not up.model.training and not up.model.upstream.training


def test_randomize_redraws_every_weight_parametrizations_included(s3prl_nn):
    loaded = S3PRLUpstream("fake_hubert").model.upstream
    bake_parametrized_weights(loaded)  # compare effective weights
    pretrained = dict(loaded.named_parameters())
    a = S3PRLUpstream("fake_hubert", randomize=True, seed=0).model.upstream
    b = S3PRLUpstream("fake_hubert", randomize=True, seed=0).model.upstream
    c = S3PRLUpstream("fake_hubert", randomize=True, seed=1).model.upstream
    drawn = dict(a.named_parameters())
    assert drawn.keys() == pretrained.keys() == {"mix.weight", "mix.bias", "scale"}
    for name, value in pretrained.items():
        assert not torch.equal(drawn[name], value), f"{name} kept its pretrained value"
    assert all(torch.equal(drawn[k], v) for k, v in b.named_parameters())
    assert not torch.equal(drawn["mix.weight"], dict(c.named_parameters())["mix.weight"])
    assert S3PRLUpstream("fake_hubert", randomize=True).fingerprint != S3PRLUpstream("fake_hubert").fingerprint


def test_unknown_name_is_one_line(s3prl_nn):
    with pytest.raises(S3PRLUpstreamError) as caught:
        S3PRLUpstream("fake_hubrt")
    line = error_line(caught.value)
    assert "\n" not in line and "'fake_hubrt' is not an s3prl upstream name" in line and "fake_hubert" in line


def test_s3prl_config_instantiates_with_a_name(s3prl_nn, conf_dir):
    import hydra.utils
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(conf_dir / "upstream" / "s3prl.yaml")
    cfg.name = "fake_wavlm"
    up = hydra.utils.instantiate(cfg)
    assert isinstance(up, S3PRLUpstream) and up.upstream_name == "fake_wavlm" and up.min_samples == 800


# --- importing s3prl ----------------------------------------------------------------------------------


def test_unimportable_s3prl_gives_one_actionable_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3prl", None)  # makes `import s3prl` raise ImportError
    monkeypatch.delitem(sys.modules, "s3prl.nn", raising=False)
    with pytest.raises(S3PRLUnavailableError) as caught:
        S3PRLUpstream("hubert")
    line = error_line(caught.value)
    assert "\n" not in line and "cannot import s3prl" in line and "[s3prl]" in line and "torchaudio" in line


def test_removed_torchaudio_apis_are_provided_only_where_missing(monkeypatch):
    import types

    old = types.ModuleType("torchaudio")
    old.set_audio_backend = backend = object()
    old.sox_effects = effects = object()
    assert provide_removed_torchaudio_apis(old) == [] and old.set_audio_backend is backend
    assert old.sox_effects is effects
    new = types.ModuleType("torchaudio")
    monkeypatch.setitem(sys.modules, "torchaudio", new)
    monkeypatch.delitem(sys.modules, "torchaudio.sox_effects", raising=False)
    assert provide_removed_torchaudio_apis(new) == ["set_audio_backend", "sox_effects"]
    assert new.set_audio_backend("sox_io") is None
    from torchaudio.sox_effects import apply_effects_tensor  # what s3prl imports

    with pytest.raises(RuntimeError, match="removed in torchaudio 2.9"):
        apply_effects_tensor(None, 16_000, [])


BROKEN_TORCHAUDIO = "raise OSError('Could not load this library: /x/torchaudio/lib/_torchaudio.so')\n"
USE_THE_PROJECT = """
import sys, logging
import speechbias
import torch
from speechbias.upstream.classical import FbankUpstream
from speechbias.upstream.hf import HFUpstream
import transformers.utils.import_utils as iu
up = FbankUpstream()
states, frames = up(torch.randn(1, 8000), torch.tensor([8000]))
assert sys.modules["torchaudio"] is None and not iu.is_torchaudio_available()
from speechbias.upstream.s3prl import S3PRLUpstream
try:
    S3PRLUpstream("fbank")
except Exception as err:
    from speechbias.errors import error_line
    print(error_line(err))
"""


def test_an_unloadable_torchaudio_is_hidden_with_one_line(tmp_path):
    """A torchaudio whose import fails as PyPI's CUDA build does beside a CPU torch: transformers and the
    fbank upstream work without it, one warning line says so, the s3prl upstream says it in its error."""
    package = tmp_path / "site" / "torchaudio"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(BROKEN_TORCHAUDIO)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [sys.executable, "-c", USE_THE_PROJECT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = [ln for ln in proc.stderr.splitlines() if "torchaudio" in ln]
    assert len(warnings) == 1 and "is installed but cannot load (OSError: Could not load" in warnings[0]
    assert proc.stdout.startswith("error: cannot import s3prl: torchaudio") and "cannot load" in proc.stdout
    assert len(proc.stdout.strip().splitlines()) == 1


# --- the real package ------------------------------------------------------------------------------


@needs_real
@pytest.mark.parametrize("name", ["fbank", "mfcc"])
def test_real_weight_free_upstreams_exclude_the_copied_frames(name):
    """s3prl's fbank/mfcc normalise each clip to zero mean over the frames Kaldi computes
    (1 + (n - 400) // 160, no centring): the temporal mean over the valid frames must be 0. With s3prl's
    hs_len ((n - 1) // 160 + 1, 2-3 frames more) it was the last frame instead."""
    up = S3PRLUpstream(name)
    lengths = [16_000, 12_345, 4_000]
    wavs, lens = random_wavs(lengths, seed=3)
    states, frames = up(wavs, lens)
    assert frames.tolist() == [1 + (n - 400) // 160 for n in lengths] == [98, 75, 23]
    for row, t in enumerate(frames.tolist()):
        assert states[0][row, :t].double().mean(0).abs().max() < 1e-5
        assert states[0][row, :t].double().std(0).min() > 0.5
    alone, alone_frames = up(wavs[2:, :4_000], lens[2:])
    torch.testing.assert_close(alone[0][0, :23], states[0][2, :23], atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3prl_ckpt")
    return {family: save_tiny_hf_checkpoint(root / family, family, seed=7) for family in ("wav2vec2", "hubert")}


@needs_real
@pytest.mark.parametrize("family", ["wav2vec2", "hubert"])
def test_real_hf_upstreams_match_the_hf_path_on_the_same_weights(family, tiny_checkpoints):
    from speechbias.upstream.hf import HFUpstream

    path = str(tiny_checkpoints[family])
    s3 = S3PRLUpstream(f"hf_{family}_custom", path_or_url=path)
    hf = HFUpstream(model_id=path)
    assert (s3.num_layers, s3.hidden_size, s3.frame_rate) == (hf.num_layers, hf.hidden_size, hf.frame_rate)
    lengths = [16_000, 12_345, 4_000, 16_000]
    wavs, lens = random_wavs(lengths, seed=8)
    (s3_states, s3_frames), (hf_states, hf_frames) = s3(wavs, lens), hf(wavs, lens)
    assert s3_frames.tolist() == hf_frames.tolist() == [computed_len(n) for n in lengths]  # the double's count
    for layer, (a, b) in enumerate(zip(s3_states, hf_states)):
        for row, t in enumerate(hf_frames.tolist()):
            mean_gap = (a[row, :t].double().mean(0) - b[row, :t].double().mean(0)).abs().max()
            assert mean_gap <= 1e-5, f"layer {layer} clip {row}: temporal means {mean_gap:.2e} apart"
            torch.testing.assert_close(a[row, :t], b[row, :t], atol=1e-5, rtol=1e-5)


@needs_real
def test_real_randomize_leaves_no_pretrained_tensor(tiny_checkpoints):
    from speechbias.upstream.hf import HFUpstream

    path = str(tiny_checkpoints["wav2vec2"])
    loaded = S3PRLUpstream("hf_wav2vec2_custom", path_or_url=path).model.upstream
    bake_parametrized_weights(loaded)
    pretrained = loaded.state_dict()
    for random_model in (
        S3PRLUpstream("hf_wav2vec2_custom", path_or_url=path, randomize=True).model.upstream,
        HFUpstream(model_id=path, randomize=True).model,
    ):
        drawn = {k.removeprefix("model."): v for k, v in random_model.state_dict().items()}
        same = [
            k.removeprefix("model.")
            for k, v in pretrained.items()
            if v.is_floating_point() and torch.equal(v, drawn[k.removeprefix("model.")])
        ]
        assert not same, f"kept pretrained values: {same}"


@needs_real
def test_real_failures_print_one_line_and_exit_1(tmp_path):
    """As typed: a wav2vec2 checkpoint whose conv stack strides 40 (s3prl assumes 320), and an unknown name."""
    odd = save_tiny_hf_checkpoint(tmp_path / "stride40", "wav2vec2", conv_stride=[5, 2, 2, 2, 1, 1, 1])
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(tmp_path / "cache"))
    env.pop("HYDRA_FULL_ERROR", None)
    for overrides, expected in [
        (["upstream.name=hf_wav2vec2_custom", f"upstream.path_or_url={odd}"], "s3prl declares one frame per 320"),
        (["upstream.name=hubret"], "'hubret' is not an s3prl upstream name"),
    ]:
        proc = subprocess.run(
            [
                sys.executable,
                str(REPO_ROOT / "evaluate.py"),
                "upstream=s3prl",
                *overrides,
                "logger=none",
                f"hydra.run.dir={tmp_path / 'run'}",
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("error:")]
        assert proc.returncode == 1 and len(errors) == 1 and expected in errors[0], proc.stderr[-1500:]
        assert "Traceback" not in proc.stdout + proc.stderr
