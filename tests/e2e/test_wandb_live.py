"""train.py with logger=wandb, as typed (the real wandb, offline): the losses reach W&B while the head
trains, in the same W&B run as the results logged at the end, and a rerun into the job folder (a resumed
or requeued job) continues that run (its id is kept in the folder).

The offline run file (``run-<id>.wandb``) is read here with a reader written from its format: a 7-byte
header (":W&B", magic 0xBEE1, version) then LevelDB log blocks of 32 KiB whose records (FULL / FIRST /
MIDDLE / LAST) hold wandb's own ``Record`` protobufs (``wandb.proto.wandb_internal_pb2``). wandb 0.31
ships no Python reader of it any more (its datastore moved to the Go core).
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from speechbias.report.tracker import Tracker

REPO = Path(__file__).resolve().parents[2]
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path):
    """The Record protobufs of an offline ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B" and struct.unpack("<H", data[4:6])[0] == 0xBEE1
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or kind == 0:  # a block's zero-filled tail
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def history(path: Path) -> list[dict]:
    return [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
        for r in wandb_records(path)
        if r.WhichOneof("record_type") == "history"
    ]


def _train(run_dir: Path, home: Path, *extra: str) -> None:
    env = dict(os.environ, HOME=str(home), HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    command = [sys.executable, str(REPO / "train.py"), "logger=wandb", "max_steps=400", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run([*command, *extra], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_losses_reach_wandb_while_training_and_a_rerun_continues_the_run(tmp_path):
    run_dir = tmp_path / "run"
    _train(run_dir, tmp_path / "home")
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    [offline] = list((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    records = history(offline / f"run-{run_id}.wandb")
    during = [r for r in records if "trainer/global_step" in r]
    steps = sorted({r["trainer/global_step"] for r in during})
    assert len(steps) >= 10 and steps[0] <= steps[-1] / 5  # spread over the training, not all at its end
    assert any("ser/train/mse" in r for r in during) and any("ser/val/r2" in r for r in during)
    # the results logged at the end went into the same run, after the training's records
    first_result = next(i for i, r in enumerate(records) if any(k.startswith("propagation/") for k in r))
    assert first_result > max(i for i, r in enumerate(records) if "trainer/global_step" in r)
    # the dev curve reached the run live: it is not replayed at the end (each validation once)
    dev_steps = [r["trainer/global_step"] for r in records if "ser/val/r2" in r and "trainer/global_step" in r]
    assert dev_steps and len(dev_steps) == len(set(dev_steps))
    assert not any("ser/val/r2" in r and "trainer/step" in r for r in records)
    # a rerun into the folder (a resumed or requeued job) continues the same W&B run
    _train(run_dir, tmp_path / "home", "force=true")
    assert (run_dir / "wandb_run_id").read_text().strip() == run_id
    assert len(list((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))) == 2


def test_a_tracker_pickles_without_its_live_run(tmp_path):
    tracker = Tracker(kind="wandb", mode="disabled")
    tracker._live = object()  # stands for a live W&B run, which cannot be pickled
    assert pickle.loads(pickle.dumps(tracker))._live is None
    assert tracker.lightning_logger(tmp_path / "run") == {}  # disabled: no W&B run, no logger, no file
    assert not (tmp_path / "run").exists()
