"""The sweep table written to a file or a log (``> log``, SLURM's output file): every job name and error
whole on its own line, never folded at 80 or 100 columns."""

from __future__ import annotations

import io

from speechbias.launch.sweep_status import StatusRow, print_status_table


def test_a_table_written_to_a_file_keeps_every_cell_whole(tmp_path):
    job = "aggregation=max_q3,bias_test=european_african_american,upstream=wav2vec2_large_lv60," + "x" * 120
    error = "CorpusError: /data/speat/coraal/DCA/audio: no such folder; set paths.data_root " + "y" * 100
    rows = [StatusRow(job, job, "ok", 1.5, ""), StatusRow(job + "2", job, "failed", 2.0, error)]
    out = io.StringIO()  # not a terminal, like a redirect to a file
    print_status_table(rows, tmp_path / "sweep_status.csv", file=out)
    lines = out.getvalue().splitlines()
    assert any(job in line and "ok" in line for line in lines)
    assert any(job + "2" in line and error in line for line in lines)
    assert max(len(line) for line in lines) > 300


def test_a_parallel_sweeps_table_in_a_log_file_keeps_every_error_whole_with_ci_terminal_variables(tmp_path):
    """``python evaluate.py -m ... hydra/launcher=parallel > log`` where the environment says "colour, 80
    columns" (``FORCE_COLOR``, ``COLUMNS``: CI runners, schedulers): the log is a file, so each job's row
    holds its whole job name and error on one line (rich folded them at 100 columns before)."""
    import os
    import subprocess
    import sys

    from entry_commands import REPO

    log = tmp_path / "sweep.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", FORCE_COLOR="1", COLUMNS="80")
    missing = tmp_path / "no_such_manifest_in_this_folder.csv"
    with log.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "evaluate.py", "-m", "upstream=fbank", "bias_test=demo_voice",
             "speat.n_permutations=100,200", f"bias_test.manifest={missing}", "hydra/launcher=parallel",
             "hydra.launcher.n_jobs=2", "hydra.callbacks.preflight.enabled=false", "logger=none",
             f"hydra.sweep.dir={tmp_path / 'sweep'}"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 1
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # FORCE_COLOR: the colours stay, the layout not
    table = text[text.index("sweep jobs") :]
    error = f"bias_test.manifest={missing}: no such file and no builder configured"
    for n in (100, 200):
        rows = [ln for ln in table.splitlines() if f"speat.n_permutations={n}," in ln]
        assert len(rows) == 1 and error in rows[0] and "failed" in rows[0], table
