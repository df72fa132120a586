"""Valence sets: rating scales, and clear errors for bad ratings tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.audio_fixtures import write_clip
from ser.helpers import REPO_ROOT, write_valence_csv
from speechbias.ser.valence import (
    ValenceDataError,
    csv_valence_set,
    eu_emotion_valence_set,
    mess_valence_set,
    scale_valence,
    unscale_valence,
)


def test_scales_map_the_ends_of_each_rating_scale_to_0_and_1():
    np.testing.assert_allclose(scale_valence([0, 25, 100], 0, 100), [0.0, 0.25, 1.0])
    np.testing.assert_allclose(scale_valence([1, 2, 5], 1, 5), [0.0, 0.25, 1.0])  # EU-Emotion
    np.testing.assert_allclose(unscale_valence(scale_valence([1.7, 4.2], 1, 5), 1, 5), [1.7, 4.2])
    with pytest.raises(ValueError, match="high > low"):
        scale_valence([1], 5, 1)


def test_csv_set_resolves_paths_and_scales(tmp_path):
    vs = csv_valence_set(write_valence_csv(tmp_path), low=0, high=100)
    assert len(vs) == 24 and all(p.startswith(str(tmp_path)) for p in vs.table["path"])
    np.testing.assert_allclose(vs.scaled, vs.table["valence"].to_numpy() / 100, rtol=1e-6)


def test_shipped_demo_set_is_valid_and_small():
    vs = csv_valence_set(REPO_ROOT / "experiments/demo/valence/valence.csv", synthetic=True)
    assert len(vs) == 48 and vs.table["speaker"].nunique() == 4
    assert vs.table["valence"].between(0, 100).all()
    size = sum(
        (REPO_ROOT / "experiments/demo/valence" / p).stat().st_size
        for p in pd.read_csv(REPO_ROOT / "experiments/demo/valence/valence.csv")["path"]
    )
    assert size < 1.5e6


def _rewrite(csv, fn):
    df = pd.read_csv(csv)
    fn(df)
    df.to_csv(csv, index=False)
    return csv


def test_missing_ratings_file(tmp_path):
    with pytest.raises(ValenceDataError, match="ratings file does not exist"):
        csv_valence_set(tmp_path / "nope.csv")


def test_unexpected_columns_name_the_file(tmp_path):
    csv = _rewrite(write_valence_csv(tmp_path), lambda df: df.insert(3, "Val", df.pop("valence")))
    with pytest.raises(ValenceDataError, match=r"valence\.csv: missing column\(s\) \['valence'\]"):
        csv_valence_set(csv)


def test_nan_ratings_name_the_rows(tmp_path):
    def blank(df):
        df.loc[[3, 7], "valence"] = np.nan

    csv = _rewrite(write_valence_csv(tmp_path), blank)
    with pytest.raises(ValenceDataError, match=r"2 clip\(s\) without a valence rating .* row\(s\) 5, 9"):
        csv_valence_set(csv)


def test_unparsable_and_out_of_range_ratings(tmp_path):
    def text(df):
        df["valence"] = df["valence"].astype(object)
        df.loc[2, "valence"] = "high"

    with pytest.raises(ValenceDataError, match=r"not a number in row\(s\) 4 .*'high'"):
        csv_valence_set(_rewrite(write_valence_csv(tmp_path / "a"), text))

    def too_big(df):
        df.loc[0, "valence"] = 130

    with pytest.raises(ValenceDataError, match=r"outside the scale \[0, 100\] in row\(s\) 2"):
        csv_valence_set(_rewrite(write_valence_csv(tmp_path / "b"), too_big))


def test_missing_audio_names_the_rows(tmp_path):
    csv = write_valence_csv(tmp_path)
    (tmp_path / "clips" / "s0_1.wav").unlink()
    with pytest.raises(ValenceDataError, match=r"1 audio file\(s\) not found in row\(s\) 3"):
        csv_valence_set(csv)


def _mess_tree(root, codes, rated):
    for k, code in enumerate(codes):
        write_clip(root / "clips" / f"{code}_SCR.wav", seconds=0.3, seed=k)
    rows = [
        {"code": c, "Gender": c[1], "Talker": c[2], "Emotion": c[0], "Valence": 10 + 5 * k, "Arousal": 50}
        for k, c in enumerate(rated)
    ]
    pd.DataFrame(rows).to_csv(root / "clip_info.csv", index=False)


def test_mess_set_uses_the_0_100_scale(tmp_path):
    codes = ["AF1M01", "SF1M02", "AM2M01", "HM2M03"]
    _mess_tree(tmp_path, codes, codes)
    vs = mess_valence_set(tmp_path)
    assert (vs.low, vs.high) == (0.0, 100.0) and set(vs.table["speaker"]) == {"F1", "M2"}
    np.testing.assert_allclose(sorted(vs.scaled), [0.10, 0.15, 0.20, 0.25], rtol=1e-6)


def test_mess_clip_without_rating_is_an_error(tmp_path):
    codes = ["AF1M01", "SF1M02", "AM2M01", "HM2M03"]
    _mess_tree(tmp_path, codes, codes[:3])
    with pytest.raises(
        ValenceDataError, match=r"1 MESS clip\(s\) on disk have no valence rating, e.g. \['HM2M03_SCR.wav'\]"
    ):
        mess_valence_set(tmp_path)


def test_mess_nan_rating_names_file_and_row(tmp_path):
    codes = ["AF1M01", "SF1M02", "AM2M01"]
    _mess_tree(tmp_path, codes, codes)
    _rewrite(tmp_path / "clip_info.csv", lambda df: df.__setitem__("Valence", df["Valence"].where(df.index != 1)))
    with pytest.raises(ValueError, match=r"clip_info\.csv.*row\(s\) 3"):
        mess_valence_set(tmp_path)


def test_eu_emotion_set_uses_the_1_5_scale(tmp_path):
    pd.DataFrame({"ActorCode": ["A", "B"], "Age": [30, 40], "Gender": ["F", "M"]}).to_csv(
        tmp_path / "speaker_info.csv", index=False
    )
    rows = []
    for k, (sid, val) in enumerate([("A-V1E", 1.0), ("A-V2E", 2.0), ("B-V1E", 4.0), ("B-V2E", 5.0)]):
        write_clip(tmp_path / "Original" / f"{sid.replace('-', '')}.wav", seconds=0.3, seed=k)
        rows.append({"stimulus_id": sid, "valence": val, "semantically_neutral": "yes"})
    pd.DataFrame(rows).to_csv(tmp_path / "voice_file_info.csv", index=False)
    vs = eu_emotion_valence_set(tmp_path)
    assert (vs.low, vs.high) == (1.0, 5.0)
    np.testing.assert_allclose(sorted(vs.scaled), [0.0, 0.25, 0.75, 1.0], rtol=1e-6)
