"""Whisper front end: batched torch log-mel vs. transformers' feature extractor, and the frames kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import WhisperFeatureExtractor

from speechbias.upstream import whisper_frontend
from upstream.tiny_models import build_tiny, random_wavs


@pytest.fixture(scope="module")
def extractor() -> WhisperFeatureExtractor:
    return WhisperFeatureExtractor(feature_size=80)


def test_log_mel_matches_the_numpy_feature_extractor(extractor):
    lengths = [16_000, 7_777, 161]
    wavs, _ = random_wavs(lengths, seed=1)
    ours = whisper_frontend.log_mel_window(wavs, torch.from_numpy(extractor.mel_filters).float()).numpy()
    assert ours.shape == (3, 80, 3000)
    for row, n in enumerate(lengths):
        clip = wavs[row, :n].double().numpy()
        padded = np.pad(clip, (0, whisper_frontend.WINDOW_SAMPLES - n))
        # the numpy (audio_utils.spectrogram) path, independent of torch.stft
        reference = extractor._np_extract_fbank_features(padded[None, :], "cpu")[0]
        np.testing.assert_allclose(ours[row], reference, atol=2e-5)
        # and the public call on the unpadded clip
        public = extractor(clip.astype(np.float32), sampling_rate=16_000, return_tensors="np").input_features[0]
        np.testing.assert_allclose(ours[row], public, atol=2e-5)


@pytest.mark.parametrize("n", [1, 159, 160, 161, 319, 320, 321, 16_000, 123_457, 479_999, 480_000])
def test_kept_frames_count_the_frames_that_cover_audio(n):
    mel = sum(1 for i in range(3000) if 160 * i < n)  # STFT frames centred inside the clip
    encoder = sum(1 for j in range(1500) if 2 * j < mel)  # conv2 (k3, s2, p1) outputs centred on them
    lengths = torch.tensor([n])
    assert whisper_frontend.mel_frames(lengths).item() == mel
    assert whisper_frontend.encoder_frames(lengths).item() == encoder == (mel - 1) // 2 + 1


def test_only_real_audio_frames_are_kept_and_they_match_the_full_window():
    up = build_tiny("whisper", seed=4)
    lengths = [32_000, 10_000]
    wavs, lens = random_wavs(lengths, seed=2)
    states, frame_lengths = up(wavs, lens)
    assert frame_lengths.tolist() == [100, 32]  # 2 s and 0.625 s at 50 frames/s
    assert states[0].shape[1] == 100  # not the 1500 of the 30 s window
    # the kept frames are the first frames of the full 30 s encoding, untouched
    extractor = WhisperFeatureExtractor(feature_size=80)
    mel = torch.from_numpy(
        extractor(wavs[1, :10_000].numpy(), sampling_rate=16_000, return_tensors="np").input_features
    )
    with torch.no_grad():
        full = up.model(mel, output_hidden_states=True).hidden_states
    assert full[0].shape[1] == 1500
    for ours, theirs in zip(states[:-1], full[:-1]):
        torch.testing.assert_close(ours[1, :32], theirs[0, :32], atol=1e-4, rtol=1e-4)
    assert torch.all(states[0][1, 32:] == 0)


def test_a_full_30_s_clip_keeps_all_1500_frames():
    up = build_tiny("whisper", seed=4)
    states, frame_lengths = up(0.1 * torch.randn(1, 480_000), torch.tensor([480_000]))
    assert frame_lengths.item() == 1500 and states[-1].shape == (1, 1500, 32)
