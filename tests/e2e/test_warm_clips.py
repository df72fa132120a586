"""`python evaluate.py` over cached clips decodes none of them (neither the pre-run clip check nor the cache
lookup); a touched clip is decoded again, and only it; ``check_audio=full`` decodes every clip.

Each run is a subprocess; its decodes are counted by a wrapper that runs evaluate.py with
``speechbias.fileio.audio._decode_checked`` (the one place every decode of the project goes through)
appending each file's name to a log (the entry point ends with ``os._exit``, so nothing is kept in memory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo"
FAST = ("speat.n_permutations=1000", "speat.per_layer=false", "logger=none", "upstream=fbank")
COUNTING_RUN = """
import os, runpy, sys
import speechbias.fileio.audio as audio
real = audio._decode_checked
def counted(path):
    with open(os.environ["DECODE_LOG"], "a") as log:
        log.write(os.path.basename(str(path)) + "\\n")
    return real(path)
audio._decode_checked = counted
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _clips(tmp_path: Path) -> Path:
    """The demo_voice clips copied into ``tmp_path/data`` (so they can be touched), with a manifest."""
    df = pd.read_csv(DEMO / "demo_voice.csv", dtype=str, keep_default_na=False)
    for rel in df["path"]:
        (tmp_path / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO / rel, tmp_path / "data" / rel)
    df.to_csv(tmp_path / "data" / "voices.csv", index=False)
    return tmp_path / "data" / "voices.csv"


def _decodes(tmp_path: Path, manifest: Path, name: str, *overrides: str) -> list[str]:
    log = tmp_path / f"decodes-{name}.txt"
    log.write_text("")
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", DECODE_LOG=str(log))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            COUNTING_RUN,
            str(REPO / "evaluate.py"),
            f"bias_test.manifest={manifest}",
            f"paths.cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'runs' / name}",
            *FAST,
            *overrides,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return log.read_text().split()


def test_a_warm_run_decodes_no_clip_and_a_touched_clip_is_decoded_alone(tmp_path):
    manifest = _clips(tmp_path)
    cold = _decodes(tmp_path, manifest, "cold")
    assert len(set(cold)) == 40  # the clip check and the extraction
    assert _decodes(tmp_path, manifest, "warm") == []
    clip = tmp_path / "data" / "audio" / "demo_voice" / "female_03.flac"
    st = clip.stat()
    os.utime(clip, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _decodes(tmp_path, manifest, "touched") == ["female_03.flac"]
    assert _decodes(tmp_path, manifest, "warm-again") == []
    full = _decodes(tmp_path, manifest, "full", "check_audio=full")
    assert sorted(full) == sorted(set(cold))  # every clip once: the extraction reads the repaired index
