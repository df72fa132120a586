"""Manifest schema validation."""

from __future__ import annotations

import pandas as pd
import pytest

from core.audio_fixtures import write_manifest_tree
from speechbias.stimuli import ManifestError, load_manifest, validate_manifest, write_manifest
from speechbias.stimuli.manifest import read_manifest_rows, repeated_clips


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
        (_df().drop(columns=["role"]), r"missing column\(s\) role;"),
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


def test_every_missing_column_is_named_at_once_with_near_misses():
    df = pd.DataFrame({"Role": ["X"], " path ": ["a.wav"], "group": ["g"]})
    with pytest.raises(ManifestError) as info:
        validate_manifest(df, source="m.csv", check_files=False)
    msg = str(info.value)
    assert msg.startswith("m.csv: missing column(s) clip_id, path, role (column names are exact: ")
    assert "' path ' for 'path'" in msg and "'Role' for 'role'" in msg
    assert "a manifest needs columns clip_id, path, role" in msg and "its columns: Role,  path , group" in msg


def test_roles_name_the_accepted_spellings_the_rows_and_lower_case():
    with pytest.raises(ManifestError) as info:
        validate_manifest(_df(role=["x", "Y", "a", "Q"]), source="m.csv", check_files=False)
    msg = str(info.value)
    assert "role must be one of X, Y, A, B (X, Y: the target groups; A, B: the attribute poles" in msg
    assert "got 'Q', 'a', 'x' in row(s) 2, 4, 5" in msg  # the header is line 1
    assert "roles are case-sensitive: write A, X for 'a', 'x'" in msg


def test_a_relative_path_not_found_names_the_folder_it_was_resolved_against(tmp_path):
    (tmp_path / "clips").mkdir()
    manifest = tmp_path / "m.csv"
    _df(path=["clips/1.wav", "/abs/2.wav", "3.wav", "4.wav"]).to_csv(manifest, index=False)
    with pytest.raises(ManifestError) as info:
        load_manifest(manifest)
    msg = str(info.value)
    assert f"{manifest}: 4 audio file(s) not found, e.g. clips/1.wav (row(s) 2, 3, 4, 5)" in msg
    assert f"relative paths are resolved against the manifest's folder {tmp_path} " in msg
    assert f"(clips/1.wav -> {tmp_path / 'clips/1.wav'})" in msg
    with pytest.raises(ManifestError, match=r"against the bias test's root /elsewhere \(bias_test.root\)"):
        load_manifest(manifest, root="/elsewhere")
    _df(path=["/abs/2.wav", "clips/1.wav", "3.wav", "4.wav"]).to_csv(manifest, index=False)
    with pytest.raises(ManifestError) as info:  # the first missing file is absolute: nothing to explain
        load_manifest(manifest)
    assert "e.g. /abs/2.wav (row(s)" in str(info.value) and "resolved against" not in str(info.value)


def test_repeated_clips_are_the_same_file_or_the_same_audio(tmp_path):
    (tmp_path / "a.wav").write_bytes(b"x")
    (tmp_path / "link.wav").symlink_to(tmp_path / "a.wav")
    paths = [str(tmp_path / n) for n in ("a.wav", "b.wav", "link.wav", "c.wav", "d.wav", "b.wav")]
    assert repeated_clips(paths) == [[0, 2], [1, 5]]  # a symlink is the same file
    shas = {str(tmp_path / "c.wav"): "1" * 64, str(tmp_path / "d.wav"): "1" * 64}
    assert repeated_clips(paths, shas) == [[0, 2], [1, 5], [3, 4]]  # the same audio, across roles too


@pytest.mark.parametrize(
    "df",
    [
        _df().drop(columns=["role", "clip_id"]),
        _df(role=["x", "Y", "A", "B"]),
        _df(clip_id=["a", "a", "c", "d"]),
        _df(path=["1.wav", "", "3.wav", "4.wav"]),
        _df(),  # files not found
    ],
)
def test_the_pandas_free_reader_raises_what_load_manifest_raises(tmp_path, df):
    path = tmp_path / "m.csv"
    df.to_csv(path, index=False)
    with pytest.raises(ManifestError) as by_pandas:
        load_manifest(path)
    with pytest.raises(ManifestError) as by_rows:
        read_manifest_rows(path)
    assert str(by_rows.value) == str(by_pandas.value)


def test_the_pandas_free_reader_reads_what_load_manifest_reads(tmp_path):
    path = write_manifest_tree(tmp_path, n_per_role=2)
    table = load_manifest(path)
    rows = read_manifest_rows(path)
    for col in ("clip_id", "path", "role", "group", "speaker", "pair_id", "stratum"):
        assert [r[col] for r in rows] == list(table[col]), col
