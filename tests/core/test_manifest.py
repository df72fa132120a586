"""Manifest schema validation."""

from __future__ import annotations

import re

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


def _write(tmp_path, text: str, encoding: str = "utf-8"):
    for name in "1234":
        (tmp_path / f"{name}.wav").write_bytes(b"")
    path = tmp_path / "m.csv"
    path.write_text(text, encoding=encoding)
    return path


def test_a_spreadsheet_export_with_a_byte_order_mark_reads_like_plain_utf8(tmp_path):
    # Excel's "CSV UTF-8" starts with U+FEFF; read as plain utf-8 the first column would be '\ufeffclip_id'
    path = _write(tmp_path, "clip_id,path,role,note\na,1.wav,X,é\nb,2.wav,Y,\nc,3.wav,A,x\nd,4.wav,B,y\n", "utf-8-sig")
    assert path.read_bytes()[:3] == b"\xef\xbb\xbf"
    rows = read_manifest_rows(path)
    assert [r["clip_id"] for r in rows] == ["a", "b", "c", "d"] and rows[0]["note"] == "é"
    table = load_manifest(path)
    # the file's columns in its order, then the schema columns it lacks; every value a string
    assert list(table.columns) == ["clip_id", "path", "role", "note", "group", "speaker", "pair_id", "stratum"]
    assert list(table["path"]) == [str(tmp_path / f"{n}.wav") for n in "1234"]
    assert list(table["note"]) == ["é", "", "x", "y"] and list(table["stratum"]) == [""] * 4


def test_a_row_with_more_fields_than_the_header_is_named_by_both_readers(tmp_path):
    # an unquoted comma inside a value: pandas read it as a ParserError, the csv module as a field keyed None
    path = _write(tmp_path, "clip_id,path,role\na,1.wav,X\nb,2.wav,Y\nc,3.wav,A,loud, clear\nd,4.wav,B\n")
    expected = "more fields than the header's 3 columns in row(s) 4; quote values that contain commas"
    for read in (read_manifest_rows, load_manifest):
        with pytest.raises(ManifestError, match=re.escape(expected)):
            read(path)


@pytest.mark.parametrize(
    "df, expected",
    [
        (_df().drop(columns=["role", "clip_id"]), r"missing column\(s\) clip_id, role;"),
        (_df(role=["x", "Y", "A", "B"]), "roles are case-sensitive"),
        (_df(clip_id=["a", "a", "c", "d"]), "duplicate clip_id"),
        (_df(path=["1.wav", "", "3.wav", "4.wav"]), r"empty path in row\(s\) 3"),
        (_df(), r"4 audio file\(s\) not found"),
    ],
)
def test_a_manifest_file_is_refused_naming_the_problem(tmp_path, df, expected):
    path = tmp_path / "m.csv"
    df.to_csv(path, index=False)
    for read in (read_manifest_rows, load_manifest):
        with pytest.raises(ManifestError, match=expected):
            read(path)
