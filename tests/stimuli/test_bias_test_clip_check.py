"""BiasTest.load checks the clips of a manifest it builds, or finds written by a parallel job while it waited
for the build lock, with the run's ClipCheck (the pre-run check's settings), before the manifest is written
or used. Real files; the parallel job is a real process holding the real lock."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from speechbias.stimuli.bias_test import BiasTest, ClipCheck
from speechbias.stimuli.manifest import ManifestError
from tests.stimuli.corpus_trees import write_tone


def _rows(folder: Path) -> pd.DataFrame:
    """Eight rows, each its own tone, but row 6 lists row 5's file again (an attribute clip repeated)."""
    paths = {name: write_tone(folder / f"{name}.wav", 0.1, freq=200.0 + 50 * i) for i, name in enumerate("abcdefg")}
    table = [("x1", "a", "X"), ("x2", "b", "X"), ("y1", "c", "Y"), ("y2", "d", "Y")]
    table += [("a1", "e", "A"), ("a2", "e", "A"), ("b1", "f", "B"), ("b2", "g", "B")]
    return pd.DataFrame([{"clip_id": c, "path": str(paths[p]), "role": r} for c, p, r in table])


def test_a_build_with_repeated_audio_is_refused_unwritten_or_allowed_with_one_warning(tmp_path, caplog):
    rows = _rows(tmp_path / "clips")
    manifest = tmp_path / "cache" / "manifests" / "t.csv"
    test = BiasTest(name="t", manifest=str(manifest), builder=lambda: rows)
    with pytest.raises(ManifestError) as refused:
        test.load(ClipCheck(cache_dir=str(tmp_path / "cache")))
    message = str(refused.value)
    assert message.startswith(f"bias test t, built for {manifest}: 1 row(s) repeat audio listed in another row")
    assert f"row(s) 6, 7 (A: {rows.loc[4, 'path']})" in message  # CSV lines: the header is line 1
    assert message.endswith("(the manifest was not written: a rerun builds it again)")
    assert not manifest.exists()

    caplog.set_level(logging.WARNING)
    df = test.load(ClipCheck(cache_dir=str(tmp_path / "cache"), allow_duplicate_audio=True))
    repeats = [r for r in caplog.records if "repeat audio" in r.getMessage()]
    assert len(repeats) == 1 and repeats[0].getMessage().endswith("(run anyway: allow_duplicate_audio=true)")
    assert manifest.is_file() and list(df["clip_id"]) == list(rows["clip_id"])


def test_a_manifest_a_parallel_job_wrote_while_this_one_waited_is_checked(tmp_path):
    rows = _rows(tmp_path / "clips")
    manifest = tmp_path / "manifests" / "t.csv"
    manifest.parent.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from filelock import FileLock\n"
            "lock = FileLock(sys.argv[1] + '.lock'); lock.acquire(); print('held', flush=True)\n"
            "sys.stdin.readline(); open(sys.argv[1], 'w').write(sys.stdin.read()); lock.release()",
            str(manifest),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"

    def must_not_build():
        raise AssertionError("built although a parallel job wrote the manifest")

    test = BiasTest(name="t", manifest=str(manifest), builder=must_not_build)
    outcome: list[BaseException | pd.DataFrame] = []

    def load():
        try:
            outcome.append(test.load(ClipCheck()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    waiting = threading.Thread(target=load)
    waiting.start()
    time.sleep(2.0)  # the loader has found no manifest and waits for the lock
    assert waiting.is_alive() and not outcome
    holder.communicate("go\n" + rows.to_csv(index=False), timeout=60)
    waiting.join(timeout=60)
    (result,) = outcome
    assert isinstance(result, ManifestError), result
    assert str(result).startswith(f"{manifest}: 1 row(s) repeat audio listed in another row")
