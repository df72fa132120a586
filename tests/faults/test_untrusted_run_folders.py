"""Issue 40's third case: run folders are untrusted input for ``task=report``. Real folders (a real ``-m`` sweep
and a real list job rerun with a shorter list), then edited as an attacker or a broken disk would leave them:
markup and a pipe in names, spreadsheet formulas in cells, a p of NaN, a d of 1e308, a folder whose table is
not UTF-8, a config with a ``_target_`` and overrides with ``${...}``. The report is still written (exit 0,
no traceback): names escaped in report.md, formula cells neutralised in results.csv (negative numbers left
numbers), the impossible rows flagged and left out, the broken folder named in one line and skipped, nothing
instantiated or resolved, and only the list job's current pairs counted (the earlier list's named stale)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
SCRIPT = "<script>alert(1)</script>|x"
IMG = "<img src=x onerror=alert(1)>"
FORMULA = "=cmd|' /C calc'!A0"


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "evaluate.py"), *args, "logger=none"]
    return subprocess.run(command, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=600)


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr


def _edit_results(folder: Path, **values) -> None:
    table = pd.read_csv(folder / "results.csv")
    for key, value in values.items():
        table[key] = table[key].astype(object)
        table.loc[0, key] = value
    table.to_csv(folder / "results.csv", index=False)


@pytest.mark.slow
def test_report_of_hostile_and_broken_run_folders_is_written_escaped_and_flagged(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    _ok(_evaluate("-m", "upstream=fbank,mfcc", f"hydra.sweep.dir={sweep}", f"paths.cache_dir={cache}"))
    job = sweep / "list_job"
    pairs = ("bias_test=[demo_accent,demo_voice]", f"hydra.run.dir={job}", f"paths.cache_dir={cache}")
    _ok(_evaluate(*pairs, "aggregation=[mean_sum,max_last,max_sum]"))
    _ok(_evaluate(*pairs, "aggregation=[mean_sum,max_last]"))  # the same job folder, a shorter list
    assert (job / "demo_voice" / "max_sum" / "results.json").is_file()  # the earlier list's pair is still there

    fbank, mfcc = sorted(p for p in sweep.iterdir() if p.name.startswith("upstream="))
    _edit_results(fbank, test=SCRIPT, upstream=IMG, model_id=FORMULA, family="@SUM(1+1)")
    _edit_results(mfcc, p="nan")
    huge = sweep / "upstream=huge"
    shutil.copytree(fbank, huge)
    _edit_results(huge, d=1e308, test="t2")
    broken = sweep / "upstream=broken"
    shutil.copytree(fbank, broken)
    (broken / "results.csv").write_bytes(b"test,aggregation,d,p\n\xff\xfe\x00bad\n")
    # nothing read from a folder is built or resolved: a _target_ that would write a file, ${...} in overrides
    pwned = tmp_path / "pwned"
    (fbank / ".hydra" / "config.yaml").write_text(
        f"evil:\n  _target_: builtins.open\n  file: {pwned}\n  mode: w\nhome: ${{oc.env:HOME}}\n"
    )
    with open(fbank / ".hydra" / "overrides.yaml", "a", encoding="utf-8") as f:
        f.write("- +home=${oc.env:HOME}\n- +evil._target_=builtins.open\n")

    done = _evaluate("task=report", f"sweep_dir={sweep}")
    out = _ok(done)
    assert "Traceback" not in out and not pwned.exists()
    report = sweep / "report"
    md = (report / "report.md").read_text(encoding="utf-8")

    # markup from the folders is text: no raw tag, the pipe escaped (the row keeps its columns)
    assert "<script" not in md and "<img" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;\\|x" in md
    header = next(line for line in md.splitlines() if line.startswith("| model"))
    row = next(line for line in md.splitlines() if "onerror" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == len(re.findall(r"(?<!\\)\|", header))

    # results.csv: formula cells neutralised, numbers (negative ones included) left numbers
    rows = list(csv.DictReader(io.StringIO((report / "results.csv").read_text(encoding="utf-8"))))
    by_test = {r["test"]: r for r in rows}
    hostile = by_test[SCRIPT]
    assert hostile["model_id"] == "'" + FORMULA and hostile["family"] == "'@SUM(1+1)"
    assert any(r["d"].startswith("-") for r in rows) and all(float(r["d"]) == float(r["d"]) for r in rows)
    assert "${oc.env:HOME}" in hostile["overrides"] and os.environ["HOME"] not in hostile["overrides"]

    # impossible values flagged (named in report.md), left out of the tables; the report is still written
    assert {r["run_dir"] for r in rows}.isdisjoint({mfcc.name, huge.name})
    assert f"`{mfcc.name}`: p = `nan` is not a finite number" in md
    assert f"`{huge.name}`: d = `1e+308` is beyond any SpEAT d of its group sizes" in md

    # the broken folder: one line naming it, skipped, listed with its reason
    named = [line for line in out.splitlines() if str(broken) in line]
    assert len(named) == 1 and "skipped" in named[0], out
    assert f"`{broken.name}`: skipped: " in md

    # the list job counts its 4 current pairs; the earlier list's 2 are named stale, not counted
    pair_rows = sorted(r["run_dir"] for r in rows if r["run_dir"].startswith("list_job/"))
    assert pair_rows == sorted(
        f"list_job/{t}/{a}" for t in ("demo_accent", "demo_voice") for a in ("mean_sum", "max_last")
    )
    assert "2 pair folder(s) of an earlier list of their job, not counted" in md
    assert "`list_job/demo_accent/max_sum`" in md and "`list_job/demo_voice/max_sum`" in md
    assert len(rows) == 1 + 4  # the hostile-named fbank run and the 4 pairs


@pytest.mark.slow
def test_a_rerun_reads_a_hostile_run_digest_and_status_as_no_record(tmp_path):
    """Resume reads the folder too: a run_digest.json or job_status.json of another shape (a list, a file
    record that is not an object, a clip's hash that is no string) is no record: the rerun says so in one line and recomputes, exit 0."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    args = (f"hydra.run.dir={run}", f"paths.cache_dir={cache}")
    _ok(_evaluate(*args))
    want = pd.read_csv(run / "results.csv")[["test", "d", "p"]]
    record = json.loads((run / "run_digest.json").read_text())
    clip_typed = json.loads(json.dumps(record))
    clip_typed["clips"][next(iter(clip_typed["clips"]))] = [1]  # a clip's audio sha256 that is no string
    record["files"]["results.csv"] = 5  # its digest still matches the config: only the record's shape is wrong
    for hostile in ("[1, 2]", json.dumps(record), json.dumps(clip_typed)):
        (run / "run_digest.json").write_text(hostile)
        (run / "job_status.json").write_text('["running"]')
        out = _ok(_evaluate(*args))
        assert "Traceback" not in out and "have no run digest" in out and "skipping" not in out, out
        pd.testing.assert_frame_equal(pd.read_csv(run / "results.csv")[["test", "d", "p"]], want)
    assert "skipping" in _ok(_evaluate(*args))  # the digest the rerun wrote is a record again
