"""A run folder's CSV tables read back with the csv module (no pandas): what ``RunWriter.table`` wrote.

Each column is typed as ``pandas.read_csv`` types it, so a report built from these rows is the one built
from ``pd.read_csv`` of each file: an empty cell (or one of pandas' missing-value words, ``NA``, ``nan``,
...) is NaN; a column whose other cells are all integers holds ints (floats when a cell is missing), all
numbers floats (``inf``/``infinity`` either sign, any case), all ``True``/``False`` (any of pandas' three
spellings) bools, else the cells' text. tests/sweep/test_run_tables.py holds the rows equal to
``pd.read_csv`` of each file, and :func:`tables_frame` to ``pd.concat`` of those. Reading the 180 folders
of the aggregation appendix (results.csv and layers.csv each) this way took the sweep report's collection
from 0.87-0.99 to 0.09-0.10 CPU-s (``collect`` alone, best of 5 in one process, load ~3.5) against one
``pd.read_csv`` per file and a frame per folder.

A cell that is not a number is never taken for one: ``1_000`` and ``0x10`` stay text (``float`` would
read the first). One difference: a column holding an integer beyond int64 is text here, as written (pandas
reads such a column as uint64, Python ints or text, depending on its other cells). A row with more cells
than the header is a :class:`~speechbias.errors.ConfigError` naming the file (pandas raised its ParserError
or, when every row had one more, made the first column an index).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from speechbias.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

# pandas.read_csv's default missing-value words (pandas/_libs/parsers.pyx, STR_NA_VALUES)
NA_WORDS = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>"}
    | {"N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)
TRUE_WORDS = frozenset({"True", "TRUE", "true"})
FALSE_WORDS = frozenset({"False", "FALSE", "false"})
INT64 = (-(2**63), 2**63 - 1)
_INT = re.compile(r"\s*[+-]?\d+\s*")
_FLOAT = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity)\s*", re.IGNORECASE)


@dataclass
class RunTable:
    """One CSV table: its column names (in the file's order; a repeated name gets ``.1``, ``.2``, as pandas
    names it) and its rows as dicts of typed values (a short row's missing cells NaN)."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


def typed_column(cells: list[str]) -> list:
    """The cells of one column typed as ``pandas.read_csv`` types a column (see the module docstring)."""
    present = [c for c in cells if c not in NA_WORDS]
    if not present:
        return [math.nan] * len(cells)
    integers = [_INT.fullmatch(c) is not None for c in present]
    if any(i and not INT64[0] <= int(c) <= INT64[1] for i, c in zip(integers, present)):
        return [math.nan if c in NA_WORDS else c for c in cells]  # beyond int64: text, as written
    if all(integers):  # with a missing cell pandas makes the column float
        number = int if len(present) == len(cells) else float
        return [math.nan if c in NA_WORDS else number(int(c)) for c in cells]
    if all(_FLOAT.fullmatch(c) for c in present):
        return [math.nan if c in NA_WORDS else float(c) for c in cells]
    if all(c in TRUE_WORDS or c in FALSE_WORDS for c in present):
        return [math.nan if c in NA_WORDS else c in TRUE_WORDS for c in cells]
    return [math.nan if c in NA_WORDS else c for c in cells]


def _names(header: list[str]) -> list[str]:
    """Column names, a repeated one numbered as pandas numbers it (``a``, ``a.1``, ``a.2``)."""
    seen: dict[str, int] = {}
    names = []
    for name in header:
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        seen.setdefault(name, 0)
        names.append(name)
    return names


def read_run_table(path: str | Path) -> RunTable:
    """The CSV table at ``path`` (an empty file: no columns, no rows; blank lines skipped). A file that is not
    UTF-8 or not a CSV table (NUL bytes, a row longer than its header) is a ``ConfigError`` naming it;
    ``OSError`` passes."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            lines = [row for row in csv.reader(f) if row]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: unreadable results table ({exc})") from exc
    if not lines:
        return RunTable()
    columns = _names(lines[0])
    body = lines[1:]
    for number, row in enumerate(body, start=2):
        if len(row) > len(columns):
            raise ConfigError(
                f"{path}: unreadable results table (row {number} has {len(row)} cells, its header {len(columns)})"
            )
    width = len(columns)
    cells = [row + [""] * (width - len(row)) for row in body]
    values = [typed_column([row[i] for row in cells]) for i in range(width)]
    return RunTable(columns, [dict(zip(columns, row)) for row in zip(*values)] if values else [{} for _ in body])


def to_number(value):
    """``value`` as ``pd.to_numeric(errors="coerce")`` gives it: numbers and bools as they are, a number's text
    as a float, anything else NaN."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and _FLOAT.fullmatch(value):  # a number as pandas reads one
        return float(value)
    return math.nan


def _signature(table: RunTable) -> tuple:
    """What decides the dtypes of ``table``'s columns in a DataFrame: per column, the types of its values
    and whether it holds NaN (tables of one signature make one DataFrame of the dtypes each would have)."""
    out = []
    for c in table.columns:
        values = [row.get(c, math.nan) for row in table.rows]
        nan = any(isinstance(v, float) and v != v for v in values)
        out.append((c, frozenset(map(type, values)), nan))
    return tuple(out)


def tables_frame(tables: list[RunTable]) -> pd.DataFrame:
    """The tables' rows as one DataFrame, as ``pd.concat`` of each file's ``pd.read_csv`` makes it: every
    table's columns in the order they first appear, a value a table lacks NaN, each column's dtype what
    concat makes of the tables' dtypes (a bool column beside a float one is float, beside a missing one
    object). The tables are built as DataFrames one per signature (:func:`_signature`; one or two in a
    sweep, not one per file) and concatenated; their rows keep the tables' order. A table without rows adds
    its columns only (pandas 3 also lets its columns' object dtype make the result's object). pandas is
    imported here."""
    import numpy as np
    import pandas as pd

    columns = list(dict.fromkeys(c for t in tables for c in t.columns))
    groups: dict[tuple, tuple[list[str], list[int], list[dict]]] = {}
    position = 0
    for table in tables:
        if table.rows:
            names, positions, rows = groups.setdefault(_signature(table), (table.columns, [], []))
            positions.extend(range(position, position + len(table.rows)))
            rows.extend(table.rows)
            position += len(table.rows)
    frames = [pd.DataFrame(rows, columns=names) for names, _, rows in groups.values()]
    if not frames:
        return pd.DataFrame(columns=columns)
    if len(frames) == 1:
        return frames[0].reindex(columns=columns)
    frame = pd.concat(frames, ignore_index=True)
    order = np.argsort(np.concatenate([np.asarray(p) for _, p, _ in groups.values()]), kind="stable")
    return frame.take(order).reset_index(drop=True)[columns]
