"""Dev split: seeded 1/8 of clips, or whole speakers."""

from __future__ import annotations

import numpy as np
import pytest

from speechbias.ser.split import dev_split


def test_random_split_holds_out_one_eighth_reproducibly():
    speakers = np.repeat([f"s{i}" for i in range(6)], 300)  # MESS-sized: 1,800 clips
    a = dev_split(speakers, seed=3)
    assert a.sum() == 225  # 1800 / 8
    np.testing.assert_array_equal(a, dev_split(speakers, seed=3))
    assert not np.array_equal(a, dev_split(speakers, seed=4))


def test_speaker_disjoint_split_shares_no_speaker():
    rng = np.random.default_rng(0)
    speakers = rng.choice([f"s{i}" for i in range(18)], size=500)
    dev = dev_split(speakers, seed=1, speaker_disjoint=True)
    assert not set(speakers[dev]) & set(speakers[~dev])
    assert dev.sum() >= 500 / 8
    # removing the last speaker added would leave dev short of 1/8: the split is as small as it can be
    counts = {s: int((speakers[dev] == s).sum()) for s in set(speakers[dev])}
    assert dev.sum() - min(counts.values()) < 500 / 8 or len(counts) == 1


def test_speaker_disjoint_needs_two_speakers():
    with pytest.raises(ValueError, match="at least 2 speakers"):
        dev_split(["a"] * 10, speaker_disjoint=True)
    with pytest.raises(ValueError, match="fraction"):
        dev_split(["a", "b"], fraction=1.5)
