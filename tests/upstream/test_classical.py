"""Fbank / MFCC baselines against a from-the-formulas numpy computation (loop framing, periodic
Hann window, rfft power, HTK triangles written out here, natural log, DCT-II by its cosine sum)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from speechbias.upstream.classical import FbankUpstream, MfccUpstream
from upstream.tiny_models import random_wavs

SR, WIN, HOP, NFFT, NMELS = 16_000, 400, 160, 512, 80


def htk_triangles(n_mels=NMELS, f_min=20.0, f_max=8000.0) -> np.ndarray:
    """(n_fft//2+1, n_mels) triangles on linear frequency, corners equally spaced on the HTK mel scale."""

    def mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    def hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    corners = [hz(mel(f_min) + i * (mel(f_max) - mel(f_min)) / (n_mels + 1)) for i in range(n_mels + 2)]
    bank = np.zeros((NFFT // 2 + 1, n_mels))
    for k in range(NFFT // 2 + 1):
        f = k * SR / NFFT
        for m in range(n_mels):
            left, centre, right = corners[m], corners[m + 1], corners[m + 2]
            rise = (f - left) / (centre - left)
            fall = (right - f) / (right - centre)
            bank[k, m] = max(0.0, min(rise, fall))
    return bank


def reference_log_mel(clip: np.ndarray) -> np.ndarray:
    window = np.array([0.5 - 0.5 * math.cos(2 * math.pi * i / WIN) for i in range(WIN)])  # periodic Hann
    bank = htk_triangles()
    rows = []
    start = 0
    while start + WIN <= len(clip):
        frame = clip[start : start + WIN] * window
        power = np.abs(np.fft.rfft(frame, n=NFFT)) ** 2
        rows.append(np.log(np.maximum(power @ bank, 1e-10)))
        start += HOP
    return np.array(rows)


def reference_dct_ii(x: np.ndarray, n_keep: int) -> np.ndarray:
    n = x.shape[-1]
    out = np.zeros(x.shape[:-1] + (n_keep,))
    for k in range(n_keep):
        scale = math.sqrt(1.0 / n) if k == 0 else math.sqrt(2.0 / n)
        basis = np.array([math.cos(math.pi * k * (2 * i + 1) / (2 * n)) for i in range(n)])
        out[..., k] = scale * (x @ basis)
    return out


def test_filter_bank_matches_htk_triangles():
    ours = FbankUpstream().mel_filters.double().numpy()
    np.testing.assert_allclose(ours, htk_triangles(), atol=1e-6)


def test_fbank_matches_reference_per_clip_and_is_batch_invariant():
    lengths = [8_000, 3_217, 400]
    wavs, lens = random_wavs(lengths, seed=9)
    up = FbankUpstream()
    (states,), frame_lengths = up(wavs, lens)
    assert up.num_layers == 1 and up.hidden_size == 80 and up.frame_rate == 100.0 and up.family == "classical"
    for row, n in enumerate(lengths):
        reference = reference_log_mel(wavs[row, :n].double().numpy())
        assert frame_lengths[row].item() == len(reference) == 1 + (n - WIN) // HOP
        np.testing.assert_allclose(states[row, : len(reference)].numpy(), reference, rtol=1e-4, atol=1e-3)
        assert torch.all(states[row, len(reference) :] == 0)
        (alone,), _ = up(wavs[row : row + 1, :n], torch.tensor([n]))
        torch.testing.assert_close(alone[0], states[row, : len(reference)], atol=1e-5, rtol=1e-6)


def test_mfcc_is_the_orthonormal_dct_of_the_log_mels():
    lengths = [4_000, 2_500]
    wavs, lens = random_wavs(lengths, seed=10)
    up = MfccUpstream(n_mfcc=40)
    (states,), frame_lengths = up(wavs, lens)
    assert up.hidden_size == 40 and states.shape[-1] == 40
    for row, n in enumerate(lengths):
        reference = reference_dct_ii(reference_log_mel(wavs[row, :n].double().numpy()), 40)
        t = frame_lengths[row].item()
        np.testing.assert_allclose(states[row, :t].numpy(), reference, rtol=1e-4, atol=2e-3)


def test_short_clips_and_randomize_are_rejected():
    up = FbankUpstream()
    assert up.min_samples == 400
    with pytest.raises(ValueError, match="receptive field of 400"):
        up(torch.zeros(1, 399), torch.tensor([399]))
    with pytest.raises(ValueError, match="randomize=true is not defined"):
        MfccUpstream(randomize=True)
    with pytest.raises(ValueError, match="n_mfcc=90"):
        MfccUpstream(n_mfcc=90)


def test_fingerprints_differ_by_kind_and_parameters():
    assert FbankUpstream().fingerprint == FbankUpstream(display_name="other name").fingerprint
    prints = {FbankUpstream().fingerprint, MfccUpstream().fingerprint, FbankUpstream(n_mels=40).fingerprint}
    prints.add(MfccUpstream(n_mfcc=13).fingerprint)
    assert len(prints) == 4
