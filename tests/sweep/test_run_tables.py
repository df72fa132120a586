"""A run folder's CSV tables read with the csv module: each file's rows, and the rows of many files together,
equal what ``pd.read_csv`` of each file (then ``pd.concat``) gives, value for value and type for type."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.errors import ConfigError
from speechbias.results.run_tables import read_run_table, tables_frame, to_number

# tables as run folders hold them (RunWriter's CSV: shortest round-trip floats, True/False, blanks, quoted
# text) and as an untrusted folder may hold them (pandas' missing-value words, inf spellings, padded numbers,
# text that Python's float would take for a number, short rows, blank lines, a repeated column name, a BOM)
FILES = {
    "speat": (
        "upstream,test,d,p,n_x,exact,seed,lr,note\n"
        "wav2vec2-base,female_male,0.12345678901234568,0.3333333333333333,60,False,0,1e-4,'=cmd\n"
        'hubert,"young, old",-1.0000000000000002e-300,1.0,57,True,1,0.001,""\n'
    ),
    "other_columns": (
        "test,upstream,d,p,exact,seed,note,extra\n"
        "us_foreign,whisper,5e-324,0.5,,2.5,7,x\n"
        "abled_disabled,wavlm,1.7976931348623157e+308,1e-06,,3,8,\n"
    ),
    "untrusted": (
        "\ufeffa,b,c,d,e,f,g,a,h\n"
        "NA, 5,inf,TRUE,1_000,0x10,nan,1,\n"
        "\n"
        "None,+6 ,-Infinity,false,2,.5,#N/A,2\n"
        "n/a,-0,1.,True,3,1e3,<NA>\n"
    ),
    "mixed": "a,b,c,d\nTrue,1,x,-9223372036854775808\n1,2,,\n",
    "header_only": "test,d,p\n",
    "empty": "",
}


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, text in FILES.items():
        paths[name] = tmp_path / f"{name}.csv"
        paths[name].write_text(text, encoding="utf-8")
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(500), np.exp(rng.uniform(-700, 700, 500)), rng.random(500) * 1e-310])
    paths["floats"] = tmp_path / "floats.csv"
    pd.DataFrame({"d": values, "n": rng.integers(-(2**62), 2**62, values.size)}).to_csv(paths["floats"], index=False)
    return paths


def pandas_read(path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


@pytest.mark.parametrize("name", [*FILES, "floats"])
def test_each_file_reads_as_pandas_reads_it(files, name):
    table = read_run_table(files[name])
    got = pd.DataFrame(table.rows, columns=table.columns)
    want = pandas_read(files[name])
    assert table.columns == [str(c) for c in want.columns]
    if len(want):
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    else:
        assert got.empty


def test_many_files_together_read_as_pandas_concatenates_them(files):
    for names in (
        ["speat", "other_columns", "floats", "mixed", "speat", "untrusted"],
        ["untrusted", "speat", "mixed", "floats", "mixed"],
        ["speat", "speat", "other_columns"],
        ["floats"],
    ):
        got = tables_frame([read_run_table(files[n]) for n in names])
        want = pd.concat([pandas_read(files[n]) for n in names], ignore_index=True)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_a_table_without_rows_adds_its_columns_to_the_others(files):
    got = tables_frame([read_run_table(files[n]) for n in ("speat", "header_only", "empty", "other_columns")])
    want = pd.concat([pandas_read(files[n]) for n in ("speat", "other_columns")], ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_exact=True)  # header_only's columns are all speat's
    assert list(tables_frame([read_run_table(files["header_only"])]).columns) == ["test", "d", "p"]


def test_cells_as_numbers_as_pandas_coerces_them(files):
    for name in ("speat", "untrusted", "mixed", "other_columns"):
        table = read_run_table(files[name])
        frame = pandas_read(files[name])
        for column in table.columns:
            want = pd.to_numeric(frame[column], errors="coerce").tolist()
            got = [to_number(row[column]) for row in table.rows]
            assert [type(v) for v in got] == [type(v) for v in want] or all(isinstance(v, float) for v in want)
            np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


def test_a_row_longer_than_its_header_or_bytes_that_are_not_utf8_name_the_file(tmp_path):
    long_row = tmp_path / "long.csv"
    long_row.write_text("test,d\nx,1\ny,2,3\n")
    with pytest.raises(ConfigError, match=r"long\.csv: unreadable results table \(row 3 has 3 cells, its header 2\)"):
        read_run_table(long_row)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"test,d\n\xff\xfe\x00bad\n")
    with pytest.raises(ConfigError, match=r"binary\.csv: unreadable results table"):
        read_run_table(binary)


def test_an_integer_beyond_int64_keeps_its_column_as_written(tmp_path):
    """pandas reads such a column as uint64, Python ints or text depending on its other cells; here it is text."""
    path = tmp_path / "big.csv"
    path.write_text("n,m\n99999999999999999999,1.5\n,18446744073709551615\n")
    table = read_run_table(path)
    assert table.rows[0] == {"n": "99999999999999999999", "m": "1.5"}
    assert table.rows[1]["m"] == "18446744073709551615" and np.isnan(table.rows[1]["n"])


def test_a_sweep_is_collected_as_pandas_reads_each_run_folder(tmp_path):
    """collect's tables, row for row and type for type, against each folder's files read by pd.read_csv and
    concatenated (full-precision d and p, SE curves, SER runs with their predictions)."""
    from speechbias.results.sweep_results import collect
    from sweep.fake_sweep import PAPER_MODELS, write_propagation_sweep, write_speat_sweep

    sweep = tmp_path / "s"
    write_speat_sweep(sweep / "speat", models=PAPER_MODELS[:3], aggregations=("mean_sum", "max_q3"))
    write_propagation_sweep(sweep / "ser", models=PAPER_MODELS[:2], tests=("female_male",))
    rng = np.random.default_rng(1)
    for path in sorted(sweep.rglob("results.csv")):
        table = pd.read_csv(path)
        column = "d" if "d" in table.columns else "cohens_d"
        table[column] = rng.uniform(-1.5, 1.5, len(table))
        table.to_csv(path, index=False)
    got = collect(sweep)

    def expected(name: str, only_speat: bool) -> pd.DataFrame:
        frames = []
        for results in sorted(sweep.rglob("results.csv")):
            run = results.parent
            speat = "aggregation" in pd.read_csv(results).columns
            if speat != only_speat or not (run / name).is_file():
                continue
            frame = pd.read_csv(run / name).assign(run_dir=str(run.relative_to(sweep)))
            if name != "results.csv" and speat:
                frame = frame.assign(aggregation=pd.read_csv(results)["aggregation"].iloc[0])
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)

    def by_run(frame: pd.DataFrame, columns) -> pd.DataFrame:
        return frame[list(columns)].sort_values("run_dir", kind="stable").reset_index(drop=True)

    for table, name, speat in (
        (got.speat, "results.csv", True),
        (got.layers, "layers.csv", True),
        (got.se_curves, "se_curve.csv", True),
        (got.propagation, "results.csv", False),
        (got.predictions, "predictions.csv", False),
    ):
        want = expected(name, speat)
        assert list(table.columns)[: len(want.columns)] == list(want.columns)
        pd.testing.assert_frame_equal(by_run(table, want.columns), by_run(want, want.columns), check_exact=True)
