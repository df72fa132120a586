"""HFUpstream contract on tiny random models of every family: shapes, valid frames, receptive field,
batch invariance, the pad_invariant flag, eval mode, seeded randomisation, local-directory loading."""

from __future__ import annotations

import contextlib
import numpy as np
import pytest
import torch
from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2Model, WhisperModel

from speechbias.upstream.families.wav2vec2_like import receptive_field, zero_mean_unit_variance
from speechbias.upstream.hf import _bake_parametrizations, HFUpstream
from upstream.tiny_models import VARIANT_IDS, VARIANTS, W2V_TINY, build_tiny, random_wavs, tiny_config

LENGTHS = [16_000, 9_001, 4_007, 9_001]  # 1 s, odd lengths, a repeated length (one length group of two)


def conv_frames_by_loop(n: int, kernels, strides) -> int:
    """Frames of an unpadded conv stack, one layer at a time (the Conv1d length formula)."""
    for k, s in zip(kernels, strides):
        n = (n - k) // s + 1
    return n


def whisper_frames_by_count(n: int) -> int:
    """Count mel frames whose centre (i*160) lies in the clip, then encoder frames (stride 2) whose
    centre (2j) falls on one of those mel frames."""
    mel = sum(1 for i in range(3000) if 160 * i < n)
    return sum(1 for j in range(1500) if 2 * j < mel)


def expected_frames(family: str, n: int) -> int:
    if family == "whisper":
        return whisper_frames_by_count(n)
    return conv_frames_by_loop(n, W2V_TINY["conv_kernel"], W2V_TINY["conv_stride"])


@pytest.mark.parametrize(("family", "stable"), VARIANTS, ids=VARIANT_IDS)
def test_shapes_and_frame_lengths(tiny_models, family, stable):
    up = tiny_models[(family, stable)]
    wavs, lengths = random_wavs(LENGTHS)
    states, frame_lengths = up(wavs, lengths)
    expected = [expected_frames(family, n) for n in LENGTHS]
    assert frame_lengths.dtype == torch.int64
    assert frame_lengths.tolist() == expected
    assert up.num_layers == 3 == len(states)
    assert up.hidden_size == 32
    assert up.frame_rate == pytest.approx(50.0)
    for state in states:
        assert state.shape == (len(LENGTHS), max(expected), 32)
        assert state.dtype == torch.float32
        assert not state.requires_grad
        for row, n in enumerate(expected):
            assert torch.all(state[row, n:] == 0), "frames past frame_lengths must be zero padding"
            assert torch.isfinite(state[row, :n]).all() and state[row, :n].abs().sum() > 0


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wavlm"])
def test_min_samples_is_the_receptive_field(tiny_models, family):
    up = tiny_models[(family, False)]
    kernels, strides = W2V_TINY["conv_kernel"], W2V_TINY["conv_stride"]
    brute = next(n for n in range(1, 2000) if conv_frames_by_loop(n, kernels, strides) >= 1)
    assert up.min_samples == brute == 400 == receptive_field(kernels, strides)
    wavs, lengths = random_wavs([brute])
    _, frame_lengths = up(wavs, lengths)
    assert frame_lengths.tolist() == [1]
    with pytest.raises(ValueError, match="receptive field of 400"):
        up(wavs[:, : brute - 1], torch.tensor([brute - 1]))


def test_whisper_accepts_one_sample_and_rejects_over_30_s(tiny_models):
    up = tiny_models[("whisper", False)]
    assert up.min_samples == 1
    _, frame_lengths = up(torch.randn(1, 1), torch.tensor([1]))
    assert frame_lengths.tolist() == [1]
    with pytest.raises(ValueError, match="480000-sample window"):
        up(torch.zeros(1, 480_001), torch.tensor([480_001]))


@pytest.mark.parametrize(("family", "stable"), VARIANTS, ids=VARIANT_IDS)
def test_batch_invariance(tiny_models, family, stable):
    """A clip's states alone equal its states beside longer clips, on its valid frames."""
    up = tiny_models[(family, stable)]
    wavs, lengths = random_wavs(LENGTHS, seed=3)
    batch_states, batch_frames = up(wavs, lengths)
    for row, n in enumerate(LENGTHS):
        alone_states, alone_frames = up(wavs[row : row + 1, :n], torch.tensor([n]))
        assert alone_frames.item() == batch_frames[row].item()
        t = alone_frames.item()
        for layer, (alone, batch) in enumerate(zip(alone_states, batch_states)):
            diff = (alone[0, :t] - batch[row, :t]).abs().max().item()
            assert diff <= 1e-5, f"{family} layer {layer} clip {row}: max |diff| {diff:g}"


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wavlm"])
def test_pad_invariant_flag_matches_what_zero_padding_does(tiny_models, family):
    """Group-norm feature encoders change under zero padding (so pad_invariant=False is needed);
    layer-norm ones with an attention mask do not."""
    wavs, lengths = random_wavs([8_000, 16_000], seed=5)
    for stable in (False, True):
        up = tiny_models[(family, stable)]
        assert up.pad_invariant is stable
        model = up.model
        mask = torch.ones_like(wavs, dtype=torch.long)
        mask[0, 8_000:] = 0
        with torch.no_grad():
            alone = model(wavs[:1, :8_000]).last_hidden_state
            padded = model(wavs[:1], attention_mask=mask[:1] if stable else None).last_hidden_state
        t = alone.shape[1]
        diff = (alone[0] - padded[0, :t]).abs().max().item()
        if stable:
            assert diff < 1e-5
        else:
            assert diff > 1e-3, f"zero padding should change a group-norm model (diff {diff:g})"


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wavlm"])
def test_group_norm_models_are_invariant_in_equal_length_batches(tiny_models, family):
    up = tiny_models[(family, False)]
    wavs, lengths = random_wavs([6_400, 6_400, 6_400], seed=7)
    batch_states, _ = up(wavs, lengths)
    for row in range(3):
        alone_states, _ = up(wavs[row : row + 1], lengths[row : row + 1])
        for alone, batch in zip(alone_states, batch_states):
            assert (alone[0] - batch[row]).abs().max().item() <= 1e-5


def test_trailing_padding_is_ignored_for_group_norm_models(tiny_models):
    """A group-norm model given one clip with extra zeros after its length sees only the clip."""
    up = tiny_models[("wav2vec2", False)]
    wavs, _ = random_wavs([5_000])
    padded = torch.nn.functional.pad(wavs, (0, 3_000), value=0.25)  # even non-zero garbage past the end
    a, fa = up(wavs, torch.tensor([5_000]))
    b, fb = up(padded, torch.tensor([5_000]))
    assert fa.tolist() == fb.tolist()
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_always_eval_and_no_grad(tiny_models):
    up = tiny_models[("wavlm", True)]
    up.train()
    assert not up.training and not up.model.training
    assert not any(p.requires_grad for p in up.parameters())
    wavs, lengths = random_wavs([4_000, 4_000])
    with torch.enable_grad():
        first, _ = up(wavs, lengths)
        second, _ = up(wavs, lengths)  # no dropout / LayerDrop: deterministic
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not first[0].requires_grad


def test_randomize_is_seeded():
    wavs, lengths = random_wavs([4_000])
    a, _ = build_tiny("hubert", seed=0)(wavs, lengths)
    b, _ = build_tiny("hubert", seed=0)(wavs, lengths)
    c, _ = build_tiny("hubert", seed=1)(wavs, lengths)
    assert torch.equal(a[-1], b[-1])
    assert (a[-1] - c[-1]).abs().max() > 1e-3


def test_config_dict_model_requires_randomize():
    with pytest.raises(ValueError, match="randomize must be true"):
        HFUpstream.from_config_dict("wav2vec2", tiny_config("wav2vec2"), randomize=False)


def test_family_must_match_the_config():
    with pytest.raises(ValueError, match="family 'hubert' was requested"):
        HFUpstream.from_config_dict("wav2vec2", tiny_config("wav2vec2"), family="hubert")
    with pytest.raises(ValueError, match="not one of"):
        HFUpstream.from_config_dict("bert", {})


def test_unknown_model_type_in_a_local_directory(tmp_path):
    from transformers import BertConfig

    BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64).save_pretrained(
        tmp_path
    )
    with pytest.raises(ValueError, match="model_type 'bert' is not supported"):
        HFUpstream(model_id=str(tmp_path))


@pytest.mark.parametrize("family", ["wav2vec2", "whisper"])
def test_loads_weights_from_a_local_directory(tmp_path, family):
    """The pre-trained loading path, offline: save a tiny model, load it by directory, compare."""
    source = build_tiny(family, stable=True, seed=3)
    if family == "whisper":
        torch.manual_seed(3)
        full = WhisperModel(source.config)
        full.save_pretrained(tmp_path)
        reference = WhisperModel.from_pretrained(tmp_path).get_encoder()
    else:  # an unbaked transformers model, saved as a hub checkpoint would be
        torch.manual_seed(3)
        Wav2Vec2Model(source.config).save_pretrained(tmp_path)
        reference = Wav2Vec2Model.from_pretrained(tmp_path)
    loaded = HFUpstream(model_id=str(tmp_path), family=family)
    assert loaded.family == family and loaded.randomize is False
    _bake_parametrizations(reference)  # weight norm baked into a plain weight, as HFUpstream does
    ours, theirs = loaded.model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    for name, p in ours.items():
        assert torch.equal(p, theirs[name]), name
    wavs, lengths = random_wavs([6_000, 3_000])
    states, frames = loaded(wavs, lengths)
    assert len(states) == 3 and frames.tolist() == [expected_frames(family, n) for n in (6_000, 3_000)]


def test_normalize_matches_the_wav2vec2_feature_extractor():
    wavs, lengths = random_wavs([5_000, 3_333, 1_000], seed=11)
    wavs = wavs + 0.3 * (torch.arange(wavs.shape[1]) < lengths[:, None])  # a DC offset to remove
    ours = zero_mean_unit_variance(wavs.double(), lengths).numpy()
    clips = [wavs[i].double().numpy() for i in range(3)]
    mask = [(np.arange(wavs.shape[1]) < n).astype(np.int32) for n in lengths.tolist()]
    reference = Wav2Vec2FeatureExtractor.zero_mean_unit_var_norm(clips, mask)
    for row in range(3):
        np.testing.assert_allclose(ours[row], reference[row], atol=1e-9)


def test_normalize_source(tmp_path):
    stable = build_tiny("wav2vec2", stable=True)
    assert (stable.normalize, stable.normalize_source) == (True, "feat_extract_norm")
    assert build_tiny("wav2vec2", stable=False).normalize is False
    stable.model.save_pretrained(tmp_path)
    no_preprocessor = HFUpstream(model_id=str(tmp_path))
    assert (no_preprocessor.normalize, no_preprocessor.normalize_source) == (True, "feat_extract_norm")
    Wav2Vec2FeatureExtractor(do_normalize=False).save_pretrained(tmp_path)
    with_preprocessor = HFUpstream(model_id=str(tmp_path))
    assert (with_preprocessor.normalize, with_preprocessor.normalize_source) == (False, "preprocessor_config")
    assert HFUpstream(model_id=str(tmp_path), normalize=True).normalize is True
    with pytest.raises(ValueError, match="normalize=true is not defined for Whisper"):
        build_tiny("whisper", normalize=True)


def test_bfloat16_compute_returns_float32_states():
    up16 = build_tiny("wav2vec2", stable=True, dtype="bfloat16")
    up32 = build_tiny("wav2vec2", stable=True)
    wavs, lengths = random_wavs([4_000])
    s16, _ = up16(wavs, lengths)
    s32, _ = up32(wavs, lengths)
    assert next(up16.model.parameters()).dtype == torch.bfloat16
    assert s16[-1].dtype == torch.float32
    rel = (s16[-1] - s32[-1]).norm() / s32[-1].norm()
    assert rel < 0.05
    with pytest.raises(ValueError, match="dtype 'float64'"):
        build_tiny("wav2vec2", dtype="float64")


def test_bad_batches_are_rejected(tiny_models):
    up = tiny_models[("wav2vec2", True)]
    with pytest.raises(ValueError, match="lengths must have shape"):
        up(torch.zeros(2, 800), torch.tensor([800]))
    with pytest.raises(ValueError, match="exceed the padded width"):
        up(torch.zeros(1, 800), torch.tensor([900]))
    with pytest.raises(ValueError, match=r"\(B, S\) tensor"):
        up(torch.zeros(800), torch.tensor([800]))


@pytest.mark.parametrize(("family", "stable"), VARIANTS, ids=VARIANT_IDS)
def test_upstreams_pickle_for_ddp_spawn(tiny_models, family, stable):
    """ddp_spawn (DDP inside Hydra multiruns) pickles the module: a round trip gives the same states."""
    import pickle

    up = build_tiny(family, stable)
    wavs, lengths = random_wavs([6_000, 4_000])
    before, _ = up(wavs, lengths)
    after, _ = pickle.loads(pickle.dumps(up))(wavs, lengths)
    for a, b in zip(before, after):
        assert torch.equal(a, b)


@pytest.mark.parametrize("family", ["wav2vec2", "hubert", "wavlm"])
def test_baked_weight_norm_computes_what_the_parametrized_model_does(family):
    """The positional conv's weight norm is baked into a plain weight: same states as transformers' own model."""
    from speechbias.upstream.families import FAMILIES

    config_cls, model_cls = FAMILIES[family].model_classes[family]
    torch.manual_seed(0)
    reference = model_cls(config_cls(**tiny_config(family))).eval()
    assert any(torch.nn.utils.parametrize.is_parametrized(m) for m in reference.modules())
    up = build_tiny(family, seed=0)
    with torch.no_grad():  # the random control redraws the weight-normed conv (upstream/randomize.py): same values
        reference.encoder.pos_conv_embed.conv.weight = up.model.encoder.pos_conv_embed.conv.weight.clone()
    wavs, lengths = random_wavs([6_000])
    ours, _ = up(wavs, lengths)
    with torch.no_grad():
        theirs = reference(wavs, output_hidden_states=True).hidden_states
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):  # post-LN base variants: hidden_states are the block inputs/outputs
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_half_precision_cpu_guard_keeps_grouped_convolutions_right():
    """wav2vec2's positional convolution is grouped; oneDNN's bfloat16 kernel for it was 110 % off on an
    AMX CPU. Under the guard the bfloat16 result is within bfloat16 rounding of float32 on any CPU."""
    from speechbias.upstream.hf import half_precision_cpu_guard

    torch.manual_seed(0)
    conv = torch.nn.Conv1d(32, 32, 16, padding=8, groups=4)
    x = torch.randn(1, 32, 200)
    with torch.no_grad():
        ref = conv(x)
        half = conv.to(torch.bfloat16)
        with half_precision_cpu_guard(torch.bfloat16, x.device):
            out = half(x.bfloat16()).float()
    assert float((out - ref).norm() / ref.norm()) < 0.02
    assert isinstance(half_precision_cpu_guard(torch.float32, x.device), contextlib.nullcontext)
