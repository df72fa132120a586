"""A list job's pairs.csv / pairs.json: each pair's values as its own results.csv / results.json hold them
(an int column beside a blank stays ints, as in each pair's file), and the job's report.md table."""

from __future__ import annotations

import json
from types import SimpleNamespace

from speechbias.report.run_writer import RunWriter
from speechbias.tasks.speat_pairs import SpeatPairs


def test_pairs_table_keeps_each_pairs_values(tmp_path):
    named = SimpleNamespace
    todo = [(named(name="small"), named(name="mean_sum")), (named(name="large"), named(name="mean_sum"))]
    rows = [
        {"test": "small", "aggregation": "mean_sum", "d": 0.5, "p": 0.25, "n_permutations": 20, "exact": True,
         "statistics_layout": None, "human_iat_d": None},
        {"test": "large", "aggregation": "mean_sum", "d": -1.25, "p": 0.875, "n_permutations": 10000,
         "exact": False, "statistics_layout": 2, "human_iat_d": 0.49},
    ]  # fmt: skip
    job = RunWriter(tmp_path)
    SpeatPairs(SimpleNamespace(writer=job), [], [])._write_job_summary(todo, rows)
    assert (tmp_path / "pairs.csv").read_text().splitlines() == [
        "pair_dir,test,aggregation,d,p,n_permutations,exact,statistics_layout,human_iat_d",
        "small/mean_sum,small,mean_sum,0.5,0.25,20,True,,",
        "large/mean_sum,large,mean_sum,-1.25,0.875,10000,False,2,0.49",
    ]
    records = json.loads((tmp_path / "pairs.json").read_text())
    assert [r["statistics_layout"] for r in records] == [None, 2] and isinstance(records[1]["statistics_layout"], int)
    assert json.loads((tmp_path / "results.json").read_text()) == records
    table = [line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    assert cells[0] == ["pair_dir", "test", "aggregation", "d", "p", "n_permutations"]
    assert cells[2:] == [
        ["small/mean_sum", "small", "mean_sum", "0.5", "0.25", "20"],
        ["large/mean_sum", "large", "mean_sum", "-1.25", "0.875", "10000"],
    ]
