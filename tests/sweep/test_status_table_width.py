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
