"""Manifest schema validation."""

from __future__ import annotations

import pandas as pd
import pytest

from core.audio_fixtures import write_manifest_tree
from speechbias.stimuli import ManifestError, load_manifest, validate_manifest, write_manifest


def test_load_resolves_relative_paths(tmp_path):
    m = load_manifest(write_manifest_tree(tmp_path, n_per_role=2))
    assert len(m) == 8 and set(m["role"]) == {"X", "Y", "A", "B"}
    assert all(p.startswith(str(tmp_path)) for p in m["path"])


def _df(**over):
    base = {"clip_id": ["a", "b", "c", "d"], "path": ["1.wav", "2.wav", "3.wav", "4.wav"], "role": list("XYAB")}
    base.update(over)
    return pd.DataFrame(base)


@pytest.mark.parametrize(
    "df,msg",
    [
        (_df().drop(columns=["role"]), "missing required column"),
        (_df(clip_id=["a", "a", "c", "d"]), "duplicate clip_id"),
        (_df(role=["X", "Y", "A", "Q"]), "role must be one of"),
        (_df(role=["X", "X", "A", "B"]), r"no clips with role\(s\) \['Y'\]"),
        (_df(path=["1.wav", "", "3.wav", "4.wav"]), "empty path in row"),
        (_df(clip_id=["a", "", "c", "d"]), "empty clip_id"),
    ],
)
def test_bad_manifests_name_the_problem(df, msg):
    with pytest.raises(ManifestError, match=msg):
        validate_manifest(df, source="m.csv", check_files=False)


def test_missing_audio_is_reported_with_rows(tmp_path):
    with pytest.raises(ManifestError, match=r"4 audio file\(s\) not found.*row\(s\) 2, 3, 4, 5"):
        validate_manifest(_df(), source="m.csv", root=tmp_path)


def test_write_then_load_round_trip(tmp_path):
    m = load_manifest(write_manifest_tree(tmp_path, n_per_role=2))
    m["extra"] = "meta"
    out = write_manifest(m, tmp_path / "copy" / "m.csv")
    again = load_manifest(out)
    pd.testing.assert_frame_equal(m, again[m.columns])
