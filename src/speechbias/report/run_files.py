"""Write a run's results as CSV + JSON and a human-readable report.md, atomically.

Every run writes these into its Hydra output folder whether or not W&B is on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.atomic_file import atomic_write


def _write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(obj, path: str | Path) -> Path:
    """Write ``obj`` as indented JSON (numpy scalars/arrays converted) atomically."""
    return _write_text(Path(path), json.dumps(obj, indent=2, default=_json_default) + "\n")


def write_results(df: pd.DataFrame, output_dir: str | Path, stem: str = "results") -> tuple[Path, Path]:
    """Write ``df`` as ``<stem>.csv`` and ``<stem>.json`` (a list of row records) in ``output_dir``."""
    out = Path(output_dir)
    csv_path = _write_text(out / f"{stem}.csv", df.to_csv(index=False))
    records = json.loads(df.to_json(orient="records"))
    json_path = write_json(records, out / f"{stem}.json")
    return csv_path, json_path


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3g", disable_numparse: bool = False) -> str:
    """A GitHub-flavoured markdown table of ``df`` (via tabulate).

    ``disable_numparse=True`` keeps pre-formatted strings such as "100.0" exactly as given.
    """
    if df.empty:
        return "_(no rows)_"
    return df.to_markdown(index=False, floatfmt=floatfmt, disable_numparse=disable_numparse)


def write_report(output_dir: str | Path, title: str, sections: Iterable[tuple[str, str]],
                 name: str = "report.md") -> Path:
    """Write ``report.md``: a title and ``(heading, markdown body)`` sections."""
    parts = [f"# {title}", ""]
    for heading, body in sections:
        parts += [f"## {heading}", "", body.rstrip(), ""]
    return _write_text(Path(output_dir) / name, "\n".join(parts))
