"""The results of every run under one or more sweep folders, read into tables (the sweep report's input).

A run folder is any folder below a sweep folder that holds a ``results.json`` (a run writes it last,
so its presence means the run finished). Its ``results.csv`` says what kind of run it was:

* SpEAT runs (``python evaluate.py``): columns ``test``, ``aggregation``, ``d``, ``p`` (one row);
  beside it ``layers.csv`` (d at every layer) and ``se_curve.csv`` (bootstrap SE vs. stimuli);
* SER propagation runs (``python train.py``): column ``cohens_d`` (one row per bias test); beside
  it ``predictions.csv`` (one row per target clip, for pooling heads over learning rates).

Folders holding :data:`REPORT_MARKER` (a sweep report's own output) are skipped, as is everything
under them. Hydra job folders (``.hydra/``) without results are listed as incomplete.

A SpEAT job of several pairs (``bias_test=[a,b] aggregation=[...]``, tasks/speat_pairs.py) writes each
pair into ``<job>/<test>/<aggregation>/``, a run folder read like any other (its overrides: the job's, with
the pair's test and aggregation in place of the lists), and ``pairs.csv`` (:data:`PAIRS_FILE`) plus its
``results.json`` into the job folder: that folder is one finished job, its pairs are runs, not jobs;
a job stopped before its last pair is one incomplete job, and its finished pairs are read. The job records
its current pairs when it starts (:data:`CURRENT_PAIRS_FILE`); pair folders it does not list (an earlier
list's) are stale: named, not counted.

Run folders are untrusted input: a folder whose tables cannot be read (unreadable, not UTF-8, no rows,
a missing column) is named in one line and skipped (``malformed``); a result row whose d or p is not a
finite number, a p outside [0, 1] or a SpEAT d beyond what any d of its group sizes can be
(:func:`speat_d_bound`) is left out of the tables and listed in ``flagged``. Nothing read from a folder is
instantiated or resolved: overrides are read as text lines, configs not at all.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from speechbias.results.job_status import CURRENT_PAIRS_FILE, incomplete_reason
from speechbias.results.run_tables import RunTable, read_run_table, tables_frame, to_number
from speechbias.errors import ConfigError

log = logging.getLogger(__name__)

REPORT_MARKER = ".speechbias_sweep_report"
# a SpEAT result is identified by what produced it; the same key twice means a duplicated run
SPEAT_KEY = ("fingerprint", "test", "aggregation", "seed", "n_permutations")
# what a report's tables key a SpEAT result by (sweep_analysis, sweep_tables; one run of each), and what a repeat
# is named by (a table without a column names it "?")
REPORT_KEY = ("upstream", "test", "aggregation")
# the job folder table of a SpEAT job of several pairs (speechbias.tasks.speat_pairs.PAIRS_TABLE + ".csv")
PAIRS_FILE = "pairs.csv"
# what a sweep folder looks like: an experiment's fixed folder, or an ad-hoc sweep's dated one
SWEEP_DIR_EXAMPLE = (
    "e.g. multirun/paper_speat (experiment=paper_speat's) or multirun/<date>/<time>-<microseconds>-<pid> (an ad-hoc -m)"
)
FAMILY_ORDER = ("wav2vec2", "hubert", "wavlm", "whisper", "s3prl", "classical", "tiny")


@dataclass
class SweepResults:
    """Every run's results below the sweep folders.

    ``speat``: one row per SpEAT run (its results.csv row + ``run_dir``, ``overrides``).
    ``layers``: d at every single layer (``upstream, family, test, temporal, layer, d, p, run_dir``).
    ``se_curves``: bootstrap SE of d vs. number of stimuli (the run's se_curve.csv + ``run_dir``).
    ``propagation``: one row per SER run and bias test (the run's results.csv + ``run_dir``).
    ``predictions``: predicted valence per target clip and head (for pooling over learning rates).
    ``incomplete``: job folders (relative paths) with a Hydra config but no results.
    ``incomplete_reasons``: why, per incomplete folder (its ``job_status.json`` error or log line).
    ``finished``: job or run folders (relative paths) with results, repeated runs included (a job of
    several pairs once: its pairs' folders are runs in the tables, not jobs).
    ``flagged``: result rows left out (``run_dir``, ``column``, ``value``, ``why``): not finite, out of range.
    ``malformed``: folders whose tables could not be read (relative path -> why), skipped.
    ``stale``: pair folders of an earlier list of their job, not counted.
    ``repeats``: (left out, kept, (upstream, test, aggregation)) of each SpEAT run left out as a repeat of a
    newer one: the two run folders and what they measured.
    """

    sweep_dirs: list[Path]
    speat: pd.DataFrame = field(default_factory=pd.DataFrame)
    layers: pd.DataFrame = field(default_factory=pd.DataFrame)
    se_curves: pd.DataFrame = field(default_factory=pd.DataFrame)
    propagation: pd.DataFrame = field(default_factory=pd.DataFrame)
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    incomplete: list[str] = field(default_factory=list)
    incomplete_reasons: dict[str, str] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    flagged: pd.DataFrame = field(default_factory=pd.DataFrame)
    malformed: dict[str, str] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    repeats: list[tuple[str, str, tuple[str, str, str]]] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        """SpEAT runs left out as repeats."""
        return len(self.repeats)

    @property
    def n_jobs(self) -> int:
        """Job folders found: finished and incomplete."""
        return len(self.finished) + len(self.incomplete)

    def completion(self) -> str:
        """``12 of 12 jobs finished`` / ``0 of 96 jobs finished (96 failed or unfinished)``."""
        text = f"{len(self.finished)} of {self.n_jobs} job{'s' if self.n_jobs != 1 else ''} finished"
        return text + (f" ({len(self.incomplete)} failed or unfinished)" if self.incomplete else "")


def _walk_runs(sweep_dir: Path, exclude: Sequence[Path]) -> Iterable[tuple[Path, str]]:
    """(folder, kind) for every run or Hydra job folder below ``sweep_dir``, in sorted order. Kinds:
    ``run`` (a job's or run's results), ``job`` (a finished job of several pairs: :data:`PAIRS_FILE`),
    ``pair`` (one pair's results inside such a job), ``incomplete`` (a job folder without results)."""
    excluded = {p.resolve() for p in exclude}
    for root, dirs, files in os.walk(sweep_dir):
        here = Path(root)
        if REPORT_MARKER in files or here.resolve() in excluded:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in (".hydra", ".submitit", "wandb", "lightning_logs"))
        if "results.json" in files and "results.csv" in files:
            yield here, "pair" if _pair_folder(here, sweep_dir) else "run"
        elif "results.json" in files and PAIRS_FILE in files:
            yield here, "job"
        elif ".hydra" in os.listdir(here) and here != sweep_dir:
            yield here, "incomplete"


def _pair_folder(folder: Path, sweep_dir: Path) -> bool:
    """Whether ``folder`` is a pair's folder ``<job>/<test>/<aggregation>`` of a job of several pairs."""
    job = folder.parent.parent
    inside = job == sweep_dir or sweep_dir in job.parents
    return inside and not (folder / ".hydra").is_dir() and ((job / ".hydra").is_dir() or (job / PAIRS_FILE).is_file())


def _pair_overrides(job_overrides: str, row: dict) -> str:
    """A pair's overrides: its job's, the list values of ``bias_test`` and ``aggregation`` replaced by the
    pair's test and aggregation (what its one-pair job's overrides say)."""
    pair = {"bias_test": row.get("test"), "aggregation": row.get("aggregation")}
    words = []
    for word in job_overrides.split():
        key = word.split("=", 1)[0]
        words.append(f"{key}={pair[key]}" if key in pair and "=[" in word else word)
    return " ".join(words)


def _overrides(run_dir: Path) -> str:
    """The job's command-line overrides (``.hydra/overrides.yaml``) as one space-separated string."""
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return ""
    lines = [ln[2:].strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("- ")]
    return " ".join(lines)


def _mark_random_control(table: RunTable, overrides: str) -> RunTable:
    """Rename the upstream of a random-weights control (``upstream.randomize=true``) so that it does
    not share its name with the trained model."""
    if "upstream.randomize=true" not in overrides.split() or "upstream" not in table.columns:
        return table
    for row in table.rows:
        name = row["upstream"]
        if not (isinstance(name, float) and math.isnan(name)):  # a missing name stays missing
            name = str(name)
            row["upstream"] = name if "random" in name else name + " (random init)"
    return table


class MalformedFolder(Exception):
    """A run folder whose tables cannot be read as a run's (the reason; the folder is skipped)."""


@dataclass
class _Run:
    """What one finished run folder gave: its rows (None: not of that kind), tables beside them, flagged rows."""

    speat: RunTable | None = None
    layers: list[RunTable] = field(default_factory=list)
    se: list[RunTable] = field(default_factory=list)
    propagation: RunTable | None = None
    predictions: list[RunTable] = field(default_factory=list)
    flagged: list[dict] = field(default_factory=list)


def current_pairs(job_dir: Path) -> set[str] | None:
    """The ``<test>/<aggregation>`` pairs a job of several pairs runs now (:data:`CURRENT_PAIRS_FILE`, else
    its finished ``pairs.csv``), or None when it says none (a one-pair job, an older version's job)."""
    listed = _listed_pairs(job_dir)
    return listed if listed is not None else _pairs_table(job_dir)


def _listed_pairs(job_dir: Path) -> set[str] | None:
    try:
        listed = json.loads((job_dir / CURRENT_PAIRS_FILE).read_text(encoding="utf-8"))["pairs"]
        return {str(p) for p in listed}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def speat_d_bound(n_x, n_y) -> float:
    """The largest |d| SpEAT's effect size can take with ``n_x`` and ``n_y`` target clips: the mean
    difference over the standard deviation of all N = n_x + n_y associations is largest when each group's
    values are equal, where it is N / sqrt(n_x n_y) (population sd; sqrt(N (N - 1) / (n_x n_y)) with
    N - 1), 2 for equal groups; inf when the sizes are not known."""
    try:
        n_x, n_y = float(n_x), float(n_y)
    except (TypeError, ValueError):
        return math.inf
    if not (n_x >= 1 and n_y >= 1):
        return math.inf
    return (n_x + n_y) / math.sqrt(n_x * n_y)


def _flag_rows(table: RunTable, rel: str, speat: bool) -> tuple[RunTable, list[dict]]:
    """``table`` without its rows whose effect size or p cannot be a result (its d and p, or cohens_d, as
    numbers: text that is none is NaN), and those rows' flags."""
    flags, bad = [], set()
    for column in ("d", "p") if speat else ("cohens_d",):
        for i, row in enumerate(table.rows):
            raw = row[column]
            value = row[column] = to_number(raw)
            why = None
            if not math.isfinite(value):
                why = "is not a finite number"
            elif column == "p" and not 0.0 <= value <= 1.0:
                why = "is not a probability (outside [0, 1])"
            elif column == "d" and abs(value) > (bound := speat_d_bound(row.get("n_x"), row.get("n_y"))) * (1 + 1e-9):
                why = f"is beyond any SpEAT d of its group sizes (|d| <= {bound:.4g})"
            if why is not None:
                bad.add(i)
                flags.append({"run_dir": rel, "column": column, "value": str(raw), "why": why})
    return RunTable(table.columns, [row for i, row in enumerate(table.rows) if i not in bad]), flags


def _with_columns(table: RunTable, **values) -> RunTable:
    """``table`` with these columns set in every row (``DataFrame.assign``: a new column goes last)."""
    columns = table.columns + [c for c in values if c not in table.columns]
    return RunTable(columns, [{**row, **values} for row in table.rows])


def _read_run(run_dir: Path, kind: str, rel: str) -> _Run | None:
    """One finished folder's tables (None for a job folder of several pairs: its pairs are read);
    :class:`MalformedFolder` when they cannot be read as a run's."""
    if kind == "job":
        listed, finished = _listed_pairs(run_dir), _pairs_table(run_dir)
        if listed is not None and finished is not None and listed != finished:
            raise MalformedFolder(f"{PAIRS_FILE} lists the pairs of an earlier list than {CURRENT_PAIRS_FILE}")
        return None
    try:
        results = read_run_table(run_dir / "results.csv")
        overrides = _overrides(run_dir)
        if kind == "pair" and results.rows:
            overrides = _pair_overrides(_overrides(run_dir.parent.parent), results.rows[0])
        tags = {"run_dir": rel, "overrides": overrides}
        results = _mark_random_control(results, overrides)
        run = _Run()
        if not results.rows:
            raise MalformedFolder("results.csv has no rows")
        if {"test", "aggregation", "d", "p"} <= set(results.columns):  # a SpEAT run's
            results, run.flagged = _flag_rows(results, rel, speat=True)
            if not results.rows:
                return run
            mtime = (run_dir / "results.json").stat().st_mtime_ns
            run.speat = _with_columns(results, **tags, _mtime=mtime)
            for name, bucket in (("layers.csv", run.layers), ("se_curve.csv", run.se)):
                if (run_dir / name).is_file():
                    extra = _mark_random_control(read_run_table(run_dir / name), overrides)
                    if name == "layers.csv" and "d" in extra.columns:
                        if "p" not in extra.columns:
                            extra = _with_columns(extra, p=0.5)
                        extra, flags = _flag_rows(extra, f"{rel}/{name}", True)
                        run.flagged += flags
                    bucket.append(_with_columns(extra, run_dir=rel, aggregation=results.rows[0]["aggregation"]))
        elif {"test", "cohens_d"} <= set(results.columns):  # a SER propagation run's
            results, run.flagged = _flag_rows(results, rel, speat=False)
            run.propagation = _with_columns(results, **tags) if results.rows else None
            if (run_dir / "predictions.csv").is_file():
                run.predictions.append(_with_columns(read_run_table(run_dir / "predictions.csv"), run_dir=rel))
        else:
            raise MalformedFolder("results.csv is neither a SpEAT nor a propagation table (no test, d, p or cohens_d)")
        return run
    except ConfigError as exc:
        raise MalformedFolder(str(exc).split(": ", 1)[-1]) from exc
    except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise MalformedFolder(f"unreadable ({type(exc).__name__}: {exc})") from exc


def _pairs_table(job_dir: Path) -> set[str] | None:
    try:
        table = read_run_table(job_dir / PAIRS_FILE)
    except (OSError, ConfigError):
        return None
    return {str(row["pair_dir"]) for row in table.rows} if "pair_dir" in table.columns else None


def model_order(table: pd.DataFrame) -> list[str]:
    """Upstream names ordered by family (wav2vec2, HuBERT, WavLM, Whisper, others), then depth, then name."""
    if table.empty:
        return []
    cols = [c for c in ("upstream", "family", "num_layers") if c in table.columns]
    models = table[cols].drop_duplicates("upstream").copy()
    if "family" not in models:
        models["family"] = "other"
    if "num_layers" not in models:
        models["num_layers"] = 0
    rank = {f: i for i, f in enumerate(FAMILY_ORDER)}
    models["_rank"] = models["family"].map(lambda f: rank.get(str(f), len(rank)))
    models["_depth"] = pd.to_numeric(models["num_layers"], errors="coerce").fillna(0)
    models = models.sort_values(["_rank", "family", "_depth", "upstream"], kind="stable")
    return models["upstream"].astype(str).tolist()


def _sorted(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    if df.empty:
        return df
    order = {m: i for i, m in enumerate(model_order(df))} if "upstream" in df.columns else {}
    out = df.assign(_model=df["upstream"].map(order)) if order else df.assign(_model=0)
    by = ["_model"] + [k for k in keys if k in out.columns]
    return out.sort_values(by, kind="stable").drop(columns="_model").reset_index(drop=True)


def missing_sweep_folder_hint(*candidates: Path) -> str:
    """The folders beside the ``candidates`` (where a missing sweep folder was looked for) whose names are
    close to theirs (difflib), as a hint, or what a sweep folder looks like when there are none."""
    close: list[str] = []
    for missing in dict.fromkeys(Path(c) for c in candidates):
        parent = missing.parent
        siblings = sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        close += [str(parent / n) for n in difflib.get_close_matches(missing.name, siblings, n=3, cutoff=0.6)]
    if close:
        return "did you mean " + " or ".join(close) + "?"
    return f"give the multirun folder of a sweep, {SWEEP_DIR_EXAMPLE}"


def has_job_folders(sweep_dir: Path) -> bool:
    """Whether any run or Hydra job folder lies below ``sweep_dir`` (stops at the first one found)."""
    return next(iter(_walk_runs(Path(sweep_dir), ())), None) is not None


def no_job_folders_message(sweep_dirs: Sequence[Path]) -> str:
    """The one error line of a report over sweep folders that hold no job folder at all."""
    return (
        f"sweep_dir {', '.join(map(str, sweep_dirs))}: no job folders (no results.json and no .hydra/ below it); "
        f"give the folder a multirun wrote, {SWEEP_DIR_EXAMPLE}"
    )


def collect(sweep_dirs: str | Path | Sequence[str | Path], exclude: Sequence[str | Path] = ()) -> SweepResults:
    """Read every finished run below ``sweep_dirs`` (folders ``exclude`` and report folders skipped).

    SpEAT runs that repeat the same :data:`SPEAT_KEY` (e.g. one sweep run twice under different
    folder names) are kept once, the most recently written one, and counted in ``duplicates``.
    Raises ``ConfigError`` (a ``ValueError``) when a sweep folder does not exist.
    """
    if isinstance(sweep_dirs, (str, Path)):
        sweep_dirs = [sweep_dirs]
    dirs = [Path(d) for d in sweep_dirs]
    for d in dirs:
        if not d.is_dir():
            raise ConfigError(f"sweep_dir {d}: no such folder ({missing_sweep_folder_hint(d)})")
    speat, layers, se, prop, preds, incomplete, reasons, finished = [], [], [], [], [], [], {}, []
    flagged: list[dict] = []
    malformed: dict[str, str] = {}
    stale: list[str] = []
    current: dict[Path, set[str] | None] = {}
    for sweep in dirs:
        for run_dir, kind in _walk_runs(sweep, [Path(p) for p in exclude]):
            rel = str(run_dir.relative_to(sweep)) if len(dirs) == 1 else str(run_dir)
            if kind == "incomplete":
                incomplete.append(rel)
                reasons[rel] = incomplete_reason(run_dir)
                continue
            if kind == "pair":
                job = run_dir.parent.parent
                if job not in current:
                    current[job] = current_pairs(job)
                if current[job] is not None and f"{run_dir.parent.name}/{run_dir.name}" not in current[job]:
                    stale.append(rel)  # an earlier list's pair: not one of the job's runs now
                    continue
            try:
                read = _read_run(run_dir, kind, rel)
            except MalformedFolder as exc:
                log.warning("%s: %s; skipped", run_dir, exc)
                malformed[rel] = str(exc)
                if kind != "pair":
                    incomplete.append(rel)
                    reasons[rel] = f"skipped: {exc}"
                continue
            if kind != "pair":
                finished.append(rel)  # a job (or run) folder; a pair is one of its job's runs
            if read is None:
                continue
            flagged += read.flagged
            if read.speat is not None:
                speat.append(read.speat)
                layers += read.layers
                se += read.se
            if read.propagation is not None:
                prop.append(read.propagation)
                preds += read.predictions
    out = SweepResults(
        sweep_dirs=dirs,
        incomplete=sorted(incomplete),
        incomplete_reasons=reasons,
        finished=sorted(finished),
        flagged=pd.DataFrame(flagged, columns=["run_dir", "column", "value", "why"]),
        malformed=malformed,
        stale=sorted(stale),
    )
    for row in flagged:
        log.warning(
            "%s: %s = %s %s; left out of the report's tables", row["run_dir"], row["column"], row["value"], row["why"]
        )
    if stale:
        log.warning(
            "%d pair folder(s) of an earlier list of their job not counted: %s", len(stale), ", ".join(stale[:5])
        )
    if speat:
        table = tables_frame(speat)
        key = [k for k in SPEAT_KEY if k in table.columns]
        table = table.sort_values("_mtime", kind="stable")
        dup = table.duplicated(key, keep="last")
        newest = table.groupby(key, sort=False, dropna=False)["run_dir"].transform("last")
        named = [table[c].astype(str) if c in table.columns else pd.Series("?", table.index) for c in REPORT_KEY]
        out.repeats = list(
            zip(table.loc[dup, "run_dir"].astype(str), newest[dup].astype(str), zip(*(n[dup] for n in named)))
        )
        if out.duplicates:
            log.warning(
                "%d SpEAT run(s) repeat an earlier run (same %s); keeping the newest of each",
                out.duplicates,
                ", ".join(key),
            )
            kept = set(table.loc[~dup, "run_dir"])
            layers = [t for t in layers if not t.rows or t.rows[0]["run_dir"] in kept]
            se = [t for t in se if not t.rows or t.rows[0]["run_dir"] in kept]
        out.speat = _sorted(table.loc[~dup].drop(columns="_mtime"), ["test", "aggregation", "seed"])
    if layers:
        out.layers = _sorted(tables_frame(layers), ["test", "aggregation", "layer"])
    if se:
        out.se_curves = _sorted(tables_frame(se), ["test", "aggregation"])
    if prop:
        out.propagation = _sorted(tables_frame(prop), ["test", "lr", "seed"])
    if preds:
        out.predictions = tables_frame(preds)
    log.info(
        "collected %d SpEAT and %d SER run(s) from %s; %d incomplete",
        len(out.speat),
        len(prop),
        ", ".join(map(str, dirs)),
        len(out.incomplete),
    )
    return out
