"""The one writer of a run's outputs: tables, JSON, figures, report.md and what goes to W&B.

Every task writes through a :class:`RunWriter` (built from ``conf/task/*.yaml`` with the run folder);
analysis modules return data and figures and never write files. Files are written atomically into
the run folder. What should reach the experiment tracker (tables, figures, metrics) is also recorded
in ``<run>/tracker_log.jsonl`` (one JSON line per entry); the task then hands the writer to its tracker
(:class:`speechbias.report.tracker.Tracker`), which logs that record. So no tracker handle crosses
into callbacks or spawned DDP workers: they write through the writer (it pickles as a folder name),
and the process that holds the tracker logs what they recorded.

Demo runs set :attr:`RunWriter.caveat`: it becomes the first section of report.md and is drawn on
every figure (the words of :mod:`speechbias.report.caveat`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from speechbias.fileio.atomic_file import atomic_write, storage_error
from speechbias.report.caveat import markdown_caveat

TRACKER_LOG = "tracker_log.jsonl"


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def json_text(obj) -> str:
    """Indented JSON of ``obj`` (numpy scalars/arrays converted, non-finite floats as null)."""
    return json.dumps(obj, indent=2, default=_json_default) + "\n"


if TYPE_CHECKING:
    import pandas as pd

# A table as the writer takes it: a DataFrame, or its rows as dicts (column order: the first row's keys, then
# any new key of a later row), each value written as given (no per-column type is inferred). pandas is not
# imported here (a SpEAT run writes row dicts and imports no pandas): a DataFrame, pd.NA and pd.NaT can only
# come from a process that imported it, so they are recognised through sys.modules.
Table: TypeAlias = "pd.DataFrame | Sequence[dict]"


def _pandas():
    """The pandas module when this process has imported it, else None."""
    return sys.modules.get("pandas")


def is_dataframe(table) -> bool:
    """Whether ``table`` is a pandas DataFrame (without importing pandas)."""
    pd = _pandas()
    return pd is not None and isinstance(table, pd.DataFrame)


def table_rows(table: Table) -> list[dict]:
    """The rows of ``table`` as dicts (a DataFrame's by ``to_dict("records")``, row dicts as they are)."""
    return table.to_dict("records") if is_dataframe(table) else list(table)


def table_columns(table: Table) -> tuple[list[str], list[list]]:
    """(column names, rows of values) of ``table``. A DataFrame's values are taken column by column with
    their own dtype (a float32 column gives numpy float32 values, written as float32 prints them)."""
    if is_dataframe(table):
        pd = _pandas()
        columns = [str(c) for c in table.columns]
        # pandas' nullable (extension) columns as objects: an Int64 column keeps its ints and its NA
        values = [
            column.to_numpy(dtype=object) if pd.api.types.is_extension_array_dtype(column) else column.to_numpy()
            for column in (table.iloc[:, i] for i in range(table.shape[1]))
        ]
        return columns, [list(r) for r in zip(*values)] if values else [[] for _ in range(len(table))]
    names = list(dict.fromkeys(k for row in table for k in row))
    return [str(k) for k in names], [[row.get(k) for k in names] for row in table]


def is_missing(value) -> bool:
    """None, NaN (any float type) or pandas' NA / NaT: an empty CSV cell and a JSON null."""
    if value is None:
        return True
    pd = _pandas()
    if pd is not None and (value is pd.NA or value is pd.NaT):
        return True
    return isinstance(value, (float, np.floating)) and value != value


def csv_text(table: Table) -> str:
    """``table`` as CSV, byte for byte what ``DataFrame.to_csv(index=False)`` writes for a DataFrame (header,
    ``\n`` line ends, minimal quoting, a missing value as an empty cell, each value as ``str`` prints it:
    floats shortest round-trip). Written with the csv module: ~11x faster than pandas for the one-row
    results table each run (and each pair of a list job) writes (0.25 vs 2.9 ms, measured with its
    DataFrame construction and to_json), benchmarks/speat_pairs_bench.py; tests/core/test_run_writer.py
    holds it equal to pandas. One difference, for text a spreadsheet would run: a text cell (or column name)
    that begins with ``=``, ``+``, ``-``, ``@``, tab or CR and is not a number is written with a single quote
    before it (:func:`inert_cell`, OWASP's CSV-injection advice), as read from an untrusted run folder."""
    columns, rows = table_columns(table)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([inert_cell(c) for c in columns])
    writer.writerows(["" if is_missing(v) else inert_cell(v) for v in row] for row in rows)
    return out.getvalue()


# what a spreadsheet takes for the start of a formula (OWASP, CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert_cell(value):
    """``value``, or for a string a spreadsheet would take for a formula (it begins with one of
    :data:`FORMULA_STARTS` and is not a number: ``-0.5`` and ``+1e3`` are numbers) the string with a
    single quote before it; numbers and other values as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def json_value(value):
    """A table cell as JSON takes it: a missing value (:func:`is_missing`) and a non-finite float as None, a
    float32 by its shortest float32 digits; numpy's other scalars are converted when written
    (:func:`json_text`)."""
    if is_missing(value):
        return None
    if isinstance(value, np.float32 | np.float16):
        value = float(str(value))
    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    return value


def table_records(table: Table) -> list[dict]:
    """``table`` as a list of row records (JSON's view of it: :func:`json_value` of each cell)."""
    columns, rows = table_columns(table)
    return [{c: json_value(v) for c, v in zip(columns, row)} for row in rows]


def markdown_table(table: Table, floatfmt: str = ".3g", disable_numparse: bool = False) -> str:
    """A GitHub-flavoured markdown table of ``table`` (tabulate's pipe format, as ``DataFrame.to_markdown``
    calls it); ``_(no rows)_`` when empty.

    ``disable_numparse=True`` keeps pre-formatted strings such as "100.0" exactly as given.
    """
    from tabulate import tabulate

    if len(table) == 0:
        return "_(no rows)_"
    return tabulate(
        table,
        headers="keys",
        tablefmt="pipe",
        showindex=False,
        floatfmt=floatfmt,
        disable_numparse=disable_numparse,
    )


# where distributed launchers put a process's rank, in Lightning's order (the first one set is the rank:
# SLURM_PROCID can be set where SLURM does not manage the processes, so RANK and LOCAL_RANK come first)
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def launching_process() -> bool:
    """False in the processes a distributed launcher starts with a non-zero rank (torchrun, Lightning's
    DDP, srun, jsrun); True in a plain process and in rank zero."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None:
            return int(value or 0) == 0
    return True


class RunWriter:
    """Writes one run's outputs into ``output_dir`` (created on first write).

    Args:
        output_dir: the run folder (Hydra's output folder of the job).
        caveat: the demo caveat of a demo run (report.md and every figure), else None.
    """

    def __init__(self, output_dir: str | Path, caveat: str | None = None):
        self.output_dir = Path(output_dir)
        self.caveat = caveat
        if launching_process():
            # a new run (e.g. force=true into the same folder) starts a new tracker record; workers that
            # DDP launches build their own writer and must not clear what the run has recorded so far
            self.path(TRACKER_LOG).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"RunWriter({str(self.output_dir)!r})"

    def path(self, name: str) -> Path:
        """``<output_dir>/<name>``; ``name`` must be a plain file name (no folder part, not ``.`` or ``..``),
        so that no file of a run lands outside its folder, whatever a test or file name holds."""
        if not name or name in (".", "..") or Path(name).name != name or "\\" in name:
            raise ValueError(
                f"{name!r} is not a plain file name: a run writes only inside its folder {self.output_dir} "
                "(a bias test or file name with '/' or '..'?)"
            )
        return self.output_dir / name

    # -- files --------------------------------------------------------------------------------
    def text(self, name: str, text: str) -> Path:
        """Write a UTF-8 text file atomically."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        return atomic_write(self.path(name), lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def json(self, name: str, obj) -> Path:
        """Write ``obj`` as indented JSON to ``<name>`` (give the suffix, e.g. ``summary.json``)."""
        return self.text(name, json_text(obj))

    def table(self, stem: str, table: Table, *, tracker_key: str | None = None, parquet: bool = False) -> Path:
        """Write ``table`` (a DataFrame or row dicts) as ``<stem>.csv`` (:func:`csv_text`) and ``<stem>.json``
        (a list of row records, :func:`table_records`: every float at full precision), and ``<stem>.parquet``
        when asked; record it for the tracker under ``tracker_key``. Returns the CSV path."""
        csv_path = self.text(f"{stem}.csv", csv_text(table))
        self.json(f"{stem}.json", table_records(table))
        if parquet:
            import pandas as pd

            frame = table if is_dataframe(table) else pd.DataFrame(list(table))
            self.output_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path(f"{stem}.parquet"), lambda tmp: frame.to_parquet(tmp, index=False))
        if tracker_key:
            self._record({"kind": "table", "key": tracker_key, "file": f"{stem}.csv"})
        return csv_path

    def figure(
        self, stem: str, fig, *, tracker_key: str | None = None, save: Callable[..., Path] | None = None
    ) -> Path | None:
        """Save a matplotlib figure as ``<stem>.png`` (with the caveat of a demo run) and close it;
        record it for the tracker under ``tracker_key``. ``fig=None`` (nothing to draw): None.
        ``save(fig, path, caveat=)`` writes it: :func:`speechbias.report.figures.save` unless given
        (the sweep report's figures use ``paper_figures.save``: 200 dpi, the caveat under the drawing)."""
        if fig is None:
            return None
        if save is None:
            from speechbias.report.figures import save

        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = save(fig, self.path(f"{stem}.png"), caveat=self.caveat)
        if tracker_key:
            self._record({"kind": "image", "key": tracker_key, "file": path.name})
        return path

    def report(self, title: str, sections: Iterable[tuple[str, str]]) -> Path:
        """Write ``report.md``: ``# title``, then ``## heading`` and its markdown body per section; a demo
        run's caveat comes first."""
        sections = list(sections)
        if self.caveat and not any(markdown_caveat(self.caveat) == body for _, body in sections):
            sections.insert(0, ("Demo run", markdown_caveat(self.caveat)))
        parts = [f"# {title}", ""]
        for heading, body in sections:
            parts += [f"## {heading}", "", body.rstrip(), ""]
        return self.text("report.md", "\n".join(parts))

    # -- what the tracker logs ----------------------------------------------------------------
    def metrics(self, values: dict, step: int | None = None, history: bool = False) -> None:
        """Record metrics for the tracker (logged, and kept as the run's summary values).
        ``history``: a point of the training's history (e.g. the dev curve), which a tracker run that
        watched the training live already has; it is replayed only into a run started afterwards."""
        if values:
            entry = {"kind": "metrics", "values": dict(values), "step": step}
            self._record({**entry, "history": True} if history else entry)

    def tracker_log(self) -> list[dict]:
        """What this run recorded for the tracker, in order (empty when nothing was). A last line cut
        short by a killed run is skipped."""
        path = self.path(TRACKER_LOG)
        if not path.is_file():
            return []
        entries = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return entries

    def _record(self, entry: dict) -> None:
        # one JSON line appended per entry: a train.py run records a dev-curve entry per validation
        # (~560 for the paper's 20,000 steps on MESS), and rewriting the whole record each time was
        # quadratic (1.9 s for 556 entries here, vs. milliseconds appended)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = self.path(TRACKER_LOG)
        try:
            with open(path, "a", encoding="utf-8") as record:
                record.write(json.dumps(entry, default=_json_default) + "\n")
        except OSError as exc:  # a full or read-only run folder: one line naming the file (StorageError)
            error = storage_error(path, exc)
            if error is exc:
                raise
            raise error from exc
