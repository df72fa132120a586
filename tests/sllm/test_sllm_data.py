from __future__ import annotations

import pandas as pd
import pytest
from speechbias.sllm.data import MissingAudioError, SpokenStereoSetError, load_spoken_stereoset


def test_loads_released_layout(tree):
    root, durations = tree
    ds = load_spoken_stereoset(root)
    t = ds.table
    assert len(t) == len(durations) == 6
    assert list(dict.fromkeys(t["domain"])) == ["gender", "age"]
    row = t[(t["id"] == 17) & (t["speaker"] == "Guy")].iloc[0]
    assert row["group"] == "male"
    assert row["stereotypical"] == "I fixed the brakes of my car."
    assert row["anti-stereotypical"] == "I sewed a dress for my daughter."
    assert row["labels"] == {"stereotype": ["x", "y"], "gold": "stereotype"}
    assert row["audio_path"].endswith("speech/gender/00017_Guy.wav")
    assert ds.orphan_wavs == {"gender": 1, "age": 0}
    assert ds.missing.empty


def test_missing_audio_is_named_or_skipped(tmp_path, sllm_tree_maker):
    root = tmp_path / "d"
    sllm_tree_maker(root, drop=(("gender", 3, "Jenny"), ("age", 5, "Old2")))
    with pytest.raises(MissingAudioError) as err:
        load_spoken_stereoset(root)
    msg = str(err.value)
    assert "2 rows have no audio" in msg and "gender/00003_Jenny" in msg and "age/00005_Old2" in msg
    ds = load_spoken_stereoset(root, on_missing_audio="skip")
    assert len(ds.table) == 4
    assert sorted(zip(ds.missing["domain"], ds.missing["id"], ds.missing["speaker"])) == [
        ("age", 5, "Old2"),
        ("gender", 3, "Jenny"),
    ]


def test_labels_are_parsed_safely_never_executed(tmp_path, sllm_tree_maker):
    root = tmp_path / "d"
    sllm_tree_maker(root)
    csv = root / "metadata" / "gender_v1.0.csv"
    df = pd.read_csv(csv)
    marker = tmp_path / "pwned"
    df.loc[1, "labels"] = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    df.to_csv(csv, index=False)
    with pytest.raises(SpokenStereoSetError, match=r"gender_v1.0.csv data row 2: labels is not a Python literal"):
        load_spoken_stereoset(root)
    assert not marker.exists()
    df.loc[1, "labels"] = "['not', 'a', 'dict']"
    df.to_csv(csv, index=False)
    with pytest.raises(SpokenStereoSetError, match="labels must be a dict"):
        load_spoken_stereoset(root)


def test_bad_layouts_have_clear_errors(tmp_path, sllm_tree_maker):
    root = tmp_path / "d"
    sllm_tree_maker(root)
    with pytest.raises(SpokenStereoSetError, match="metadata file does not exist"):
        load_spoken_stereoset(root, version="v9")
    csv = root / "metadata" / "age_v1.0.csv"
    df = pd.read_csv(csv)
    df.drop(columns=["irrelevant"]).to_csv(csv, index=False)
    with pytest.raises(SpokenStereoSetError, match=r"missing columns \['irrelevant'\]"):
        load_spoken_stereoset(root)
    df.assign(id=["x", 5]).to_csv(csv, index=False)
    with pytest.raises(SpokenStereoSetError, match=r"non-negative integers; bad data rows \[1\]"):
        load_spoken_stereoset(root)
    with pytest.raises(ValueError, match="domains"):
        load_spoken_stereoset(root, domains=["race"])


def test_max_items_keeps_all_voices_of_first_items(tree):
    root, _ = tree
    t = load_spoken_stereoset(root, max_items=1).table
    assert sorted(zip(t["domain"], t["id"], t["speaker"])) == [
        ("age", 5, "Old1"),
        ("age", 5, "Old2"),
        ("gender", 3, "Aria"),
        ("gender", 3, "Jenny"),
    ]
