"""BiasTest.load_columns: a manifest file's columns read without pandas, the labels and the resampling a
user's manifest gives, as BiasTest.load gives them; a manifest not built yet is built."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from core.audio_fixtures import write_clip
from speechbias.stimuli.bias_test import BiasTest
from speechbias.stimuli.manifest import MANIFEST_COLUMNS

REPO = Path(__file__).resolve().parents[2]


def _manifest(folder: Path, pair_ids: bool) -> Path:
    """4 clips per role; X clips of group "women", Y of "men", A of two groups, B of none; paths relative."""
    rows = []
    for r_i, role in enumerate("XYAB"):
        for i in range(4):
            rel = f"clips/{role}{i}.wav"
            write_clip(folder / rel, seconds=0.2, freq=150 + 60 * r_i + 7 * i, seed=10 * r_i + i)
            group = {"X": "women", "Y": "men", "A": f"good{i % 2}", "B": ""}[role]
            pair = f"p{i}" if pair_ids and role in "XY" else ""
            rows.append({"clip_id": f"{role}{i}", "path": rel, "role": role, "group": f" {group} ", "pair_id": pair})
    path = folder / "user.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _user_test(path: Path) -> BiasTest:
    return BiasTest(name="demo_voice", manifest=str(path), demo_manifest=str(REPO / "data/demo/none.csv"))


def test_columns_labels_and_resampling_of_a_users_manifest(tmp_path):
    path = _manifest(tmp_path, pair_ids=True)
    test = _user_test(path)
    columns = test.load_columns()
    assert list(columns) == list(MANIFEST_COLUMNS)
    assert columns["path"] == [str(tmp_path / f"clips/{r}{i}.wav") for r in "XYAB" for i in range(4)]
    assert columns["role"] == [r for r in "XYAB" for _ in range(4)]
    assert columns["group"][:8] == ["women"] * 4 + ["men"] * 4  # stripped
    assert columns["stratum"] == [""] * 16  # a column the file lacks
    # each role's one group name; A has two and B none: their fallbacks
    assert (test.x_label, test.y_label, test.a_label, test.b_label) == ("women", "men", "pleasant", "unpleasant")
    assert test.resampling == "paired" and test.user_manifest
    loaded = _user_test(path)
    table = loaded.load()
    assert {c: list(table[c]) for c in MANIFEST_COLUMNS} == columns
    assert vars(loaded) == vars(test)


def test_targets_without_pair_ids_are_resampled_iid(tmp_path):
    test = _user_test(_manifest(tmp_path, pair_ids=False))
    test.load_columns()
    assert test.resampling == "iid"


def test_a_manifest_not_built_yet_is_built(tmp_path):
    source = pd.read_csv(_manifest(tmp_path, pair_ids=True), dtype=str, keep_default_na=False)
    target = tmp_path / "built" / "manifest.csv"
    test = BiasTest(name="built", manifest=str(target), builder=lambda: source, root=str(tmp_path))
    columns = test.load_columns()
    assert target.is_file()
    assert columns["path"] == [str(tmp_path / f"clips/{r}{i}.wav") for r in "XYAB" for i in range(4)]
    assert columns["pair_id"][:8] == [f"p{i}" for i in range(4)] * 2


def test_reading_a_manifest_file_imports_no_pandas(tmp_path):
    path = _manifest(tmp_path, pair_ids=True)
    code = (
        "import sys; from speechbias.stimuli.bias_test import BiasTest; "
        f"c = BiasTest(name='t', manifest={str(path)!r}).load_columns(); "
        "assert len(c['path']) == 16; print('pandas' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"
