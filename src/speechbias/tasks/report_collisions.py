"""The sweep report's rule on its input: one SpEAT run per (model, test, aggregation).

Every table of the report keys a SpEAT result by its upstream's name, test and aggregation: the heat map
and Figure 1 show one d per (model, test), the corrections count every (model, test) of an aggregation once,
the ANOVA, the congruence counts and appendix D count each model once, the comparison with the paper takes
one d per (model id, test). Two runs of one key that differ in a setting (``speat.n_permutations``, ``seed``,
an upstream setting such as ``upstream.n_mels`` that keeps the name, a reused folder after a config change)
would be two models to some tables and one to others: a table would pick one silently, a family would be
counted twice, the congruence would stop on a duplicate. So the report refuses them, in one line naming two
run folders that collide, what differs between them and the fix, before it writes anything
(:func:`check_one_run_per_key`: the report's config check runs it before Hydra makes the report folder, the
report task again on what it collected). Labelling the runs apart instead would keep every table running
but mix settings in one comparison (a model counted twice in a family of tests, the paper's one d per model
no longer one); a folder of one setting per report keeps every number what its table says it is.

Runs of one key with the same :data:`~speechbias.results.sweep_results.SPEAT_KEY` are repeats of one run
(the collection keeps the newest), not collisions, unless their run digests show that they read other
stimuli (a clip's audio or the manifest changed between them): those are refused the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from speechbias.errors import ConfigError
from speechbias.results.sweep_results import REPORT_KEY, SPEAT_KEY, SweepResults
from speechbias.tasks.run_markers import RUN_DIGEST_FILE, changed_keys, describe_change, read_digest

# the result columns that tell two runs of one key apart (the repeat key without the report's key)
SETTING_COLUMNS = tuple(c for c in SPEAT_KEY if c not in REPORT_KEY)
# config keys named with their values in the error line (more are counted)
NAMED_CONFIG_KEYS = 3


@dataclass(frozen=True)
class Collision:
    """Two runs of one report key: ``key`` (upstream, test, aggregation), their ``run_dirs`` (as the
    collected table names them), and ``n_keys``: how many keys have more than one run."""

    key: tuple[str, str, str]
    run_dirs: tuple[str, str]
    n_keys: int


def first_collision(speat: pd.DataFrame) -> Collision | None:
    """The first (in the table's order) report key with several runs in the collected SpEAT table
    (repeats already removed), or None when every key has one run."""
    if speat.empty or not all(c in speat.columns for c in (*REPORT_KEY, "run_dir")):
        return None
    keys = speat[list(REPORT_KEY)].astype(str)
    several = keys.duplicated(keep=False)
    if not several.any():
        return None
    first = keys[several].iloc[0]
    runs = speat.loc[several & (keys == first).all(axis=1), "run_dir"].astype(str).tolist()
    n_keys = int(keys[several].drop_duplicates().shape[0])
    return Collision(key=tuple(first), run_dirs=(runs[0], runs[1]), n_keys=n_keys)


def _differing_columns(rows: pd.DataFrame, columns: Sequence[str], named: Sequence[str]) -> str:
    """``n_permutations 100 vs 200, fingerprint 1c7048fb vs 6f6fb60e`` for the setting ``columns`` two
    result rows differ in, but those whose config key is among the ``named`` keys of the config change
    (``speat.n_permutations``, ``seed``; any ``upstream.*`` key for a fingerprint)."""
    parts = []
    for column in columns:
        if any(
            k.rsplit(".", 1)[-1] == column or (column == "fingerprint" and k.startswith("upstream.")) for k in named
        ):
            continue
        a, b = (str(v)[:8] if column == "fingerprint" else str(v) for v in rows[column])
        parts.append(f"{column} {a} vs {b}")
    return ", ".join(parts)


def _config_change(first: Path, second: Path, columns: Sequence[str]) -> tuple[str, list[str]]:
    """What their run digests say changed (``speat.n_permutations: 100 -> 200 (+3 more)``), and the config
    keys it names: those of the differing ``columns`` (upstream settings for a fingerprint) first; ('', [])
    without digests."""
    old, new = read_digest(first / RUN_DIGEST_FILE), read_digest(second / RUN_DIGEST_FILE)
    if old is None or new is None:
        return "", []
    merged = {**old.get("values", {}), **old.get("extra", {}), **new.get("values", {}), **new.get("extra", {})}
    keys = [k for k in changed_keys(old, new) if k in merged]  # config keys, not clip paths

    def rank(key: str) -> int:
        wanted = key.rsplit(".", 1)[-1] in columns or ("fingerprint" in columns and key.startswith("upstream."))
        return 0 if wanted else 1

    keys.sort(key=rank)
    named = keys[:NAMED_CONFIG_KEYS]
    only = [
        {part: {k: v for k, v in d.get(part, {}).items() if k in named} for part in ("values", "extra")}
        for d in (old, new)
    ]
    text = describe_change(*only)
    return text + (f" (+{len(keys) - len(named)} more)" if len(keys) > len(named) else ""), named


def _fix(first: Path, second: Path, sweep_dirs: Sequence[Path]) -> str:
    """Report one setting's folder: the folder below the two runs' common folder that holds the first, or,
    when one sweep made both (its ``multirun.yaml``), a sweep folder per setting."""
    common = Path(os.path.commonpath([first.resolve(), second.resolve()]))
    where = " or ".join(str(d) for d in sweep_dirs)
    holding = [
        next((d for d in sweep_dirs if run.resolve().is_relative_to(d.resolve())), None) for run in (first, second)
    ]
    if None not in holding and holding[0] != holding[1]:  # sweep_dir and one of task.extra_sweep_dirs
        extra = holding[1] if holding[1] != sweep_dirs[0] else holding[0]
        return f"report those folders apart: leave {extra} out of task.extra_sweep_dirs"
    if (common / "multirun.yaml").is_file():
        return (
            f"one sweep ({common}) varied a setting the report does not tell apart: sweep each setting into a folder "
            f"of its own (hydra.sweep.dir=...) and report each, or move one setting's runs out of {where}"
        )
    below = first.resolve().relative_to(common).parts
    if not below:  # the second run lies inside the first one's folder
        return f"move one of them out of {where}"
    return f"report one setting's folder (e.g. sweep_dir={common / below[0]}), or move the other setting's runs out of {where}"


def _stimuli_change(first: Path, second: Path) -> str:
    """What their run digests say changed in the stimuli read (``clip x.wav changed (audio sha256 ...)``,
    ``bias_test.manifest.sha256: ...``); '' when the manifest and the clips' audio are the same (clips read from
    another folder count as the same: a digest keys a clip by its path), or a digest (or its clips) is missing."""
    old, new = read_digest(first / RUN_DIGEST_FILE), read_digest(second / RUN_DIGEST_FILE)
    if old is None or new is None or "clips" not in old or "clips" not in new:
        return ""
    manifest = "bias_test.manifest.sha256"
    only = [{"extra": {manifest: d.get("extra", {}).get(manifest)}, "clips": d["clips"]} for d in (old, new)]
    same_audio = sorted(map(str, old["clips"].values())) == sorted(map(str, new["clips"].values()))
    return "" if same_audio and only[0]["extra"] == only[1]["extra"] else describe_change(*only)


def _two_runs(results: SweepResults, first: Path, second: Path, key: Sequence[str], how: str) -> ConfigError:
    """The one error line of two runs of one report ``key`` (upstream, test, aggregation) and ``how`` they
    differ, with the fix."""
    upstream, test, aggregation = key
    where = ", ".join(str(d) for d in results.sweep_dirs)
    return ConfigError(
        f"sweep_dir {where}: {first} and {second} are two runs of {upstream} on {test} ({aggregation}) {how}; "
        "the report takes one run of each model, test and aggregation: " + _fix(first, second, results.sweep_dirs)
    )


def check_one_run_per_key(results: SweepResults) -> None:
    """Raise ``ConfigError`` when the collected runs hold two runs of one report key, or a repeat that read
    other stimuli than the run kept: one line naming two of their folders, what differs between them and
    the fix."""

    def folder(run_dir: str) -> Path:  # the collected run_dir: relative to the one sweep folder, else absolute
        return results.sweep_dirs[0] / run_dir if len(results.sweep_dirs) == 1 else Path(run_dir)

    for left_out, kept, key in results.repeats:
        first, second = folder(left_out), folder(kept)
        change = _stimuli_change(first, second)
        if change:
            raise _two_runs(results, first, second, key, f"with the same settings that read other stimuli ({change})")
    found = first_collision(results.speat)
    if found is None:
        return
    first, second = (folder(r) for r in found.run_dirs)
    rows = results.speat[results.speat["run_dir"].astype(str).isin(found.run_dirs)]
    rows = rows.set_index(rows["run_dir"].astype(str)).loc[list(found.run_dirs)]
    columns = [c for c in SETTING_COLUMNS if c in rows.columns and rows[c].astype(str).nunique() > 1]
    # the result columns that differ, then what the digests say changed in the config (its keys for those
    # columns first: for a fingerprint, the upstream's settings)
    config, named = _config_change(first, second, columns)
    what = "; ".join(p for p in (_differing_columns(rows, columns, named), config) if p) or "settings no digest names"
    others = f" ({found.n_keys - 1} more model, test and aggregation have several runs)" if found.n_keys > 1 else ""
    raise _two_runs(results, first, second, found.key, f"that differ in {what}{others}")
