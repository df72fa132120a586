"""Normalisation and per-utterance error counts against a brute-force edit distance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechbias.asr.scoring import error_counts, make_normalizer, score_utterances


def _edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Levenshtein distance over words by the textbook dynamic programme."""
    d = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(len(ref) + 1):
        d[i][0] = i
    for j in range(len(hyp) + 1):
        d[0][j] = j
    for i in range(1, len(ref) + 1):
        for j in range(1, len(hyp) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]))
    return d[-1][-1]


words = st.lists(st.sampled_from(["a", "b", "c", "dd", "e"]), min_size=0, max_size=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(words, words), min_size=1, max_size=5))
def test_counts_match_brute_force_edit_distance(pairs):
    refs = [" ".join(r) for r, _ in pairs]
    hyps = [" ".join(h) for _, h in pairs]
    c = error_counts(refs, hyps)
    for k, (r, h) in enumerate(pairs):
        row = c.iloc[k]
        assert row.ref_words == len(r)
        assert row.hyp_words == len(h)
        assert row.errors == _edit_distance(r, h) if r else row.errors == len(h)
        assert row.hits + row.substitutions + row.deletions == len(r)
        assert row.hits + row.substitutions + row.insertions == len(h)


def test_known_example():
    # minimal alignments here are unique in their S/D/I split
    c = error_counts(["turn on the kitchen light", "call mother"], ["turn of the light", "call my mother"])
    assert tuple(c.iloc[0][["substitutions", "deletions", "insertions", "ref_words"]]) == (1, 1, 0, 5)
    assert tuple(c.iloc[1][["substitutions", "deletions", "insertions", "ref_words"]]) == (0, 0, 1, 2)


def test_normalizers():
    eng = make_normalizer("whisper_english")
    assert eng("Hello, Mr. Smith! It's twenty dollars.") == "hello mister smith it is $20"
    assert make_normalizer("whisper_basic")("Hello, World!") == "hello world"
    assert make_normalizer("none")("  Hello,   World ") == "Hello, World"
    with pytest.raises(ValueError, match="normalizer must be one of"):
        make_normalizer("fancy")


def test_score_utterances_normalises_both_sides():
    s = score_utterances(["Turn OFF the lights."], ["turn off the lights"], "whisper_basic").iloc[0]
    assert s.errors == 0 and s.ref_words == 4 and s.reference_norm == "turn off the lights"
    # a filler-only reference is empty after Whisper's English normaliser: ref_words 0
    assert score_utterances(["um"], ["hello"], "whisper_english").iloc[0].ref_words == 0
