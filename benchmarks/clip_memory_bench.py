"""The clip-length limit's memory model (``extraction.max_clip_seconds=auto``) against measured peaks.

Goal (issue 40 item 5): the predicted peak of one clip's extraction (speechbias.features.clip_memory) is a
safe upper bound of the measured one. For each tiny upstream (conf/upstream/: tiny_wav2vec2, tiny_hubert,
tiny_wavlm, also with 8 heads, tiny_wav2vec2_stable, fbank) and the base-sized random wav2vec2, and each
clip length, a fresh process builds the upstream, extracts a 1 s clip through the framework (model built,
everything imported), then one clip of that length, and reports its peak RSS (ru_maxrss) and the growth
over the RSS before the long clip. Printed side by side: predicted per-clip bytes vs measured growth and
predicted peak vs measured peak, with their ratios (>= 1: the prediction bounds the measurement). Then whole
``python evaluate.py`` runs (fbank, tiny_wav2vec2, tiny_wavlm; the CPU batch of 2, one long clip among short
ones; peak RSS of the run's process) against the predicted peak of a batch of 2. Then what ``auto`` gives for
the 16 shipped models on a 24 GiB and an 80 GiB machine.

Usage: python benchmarks/clip_memory_bench.py [--seconds 5 20 60 120] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf" / "upstream"
MIB = 1 << 20

# (label, conf/upstream name, config overrides, longest length measured in seconds: T^2 models stop early)
CASES = [
    ("fbank", "fbank", {}, 300),
    ("tiny_wav2vec2", "tiny_wav2vec2", {}, 300),
    ("tiny_hubert", "tiny_hubert", {}, 300),
    ("tiny_wav2vec2_stable", "tiny_wav2vec2_stable", {}, 300),
    ("tiny_wavlm", "tiny_wavlm", {}, 120),
    ("tiny_wavlm, 8 heads", "tiny_wavlm", {"config.num_attention_heads": 8}, 120),
    ("random_wav2vec2_base", "random_wav2vec2_base", {}, 60),
]
# whole `python evaluate.py` runs (default CPU batch of 2): (upstream, lengths of the one long clip)
RUNS = [("fbank", (600, 1800)), ("tiny_wav2vec2", (600, 1200)), ("tiny_wavlm", (60, 120))]
RUN_BATCH = 2  # extraction.batch_size on a CPU (conf/evaluate.yaml)
# the paper's 16 models, as the paper's sweep names them
SHIPPED = yaml.safe_load((REPO / "conf" / "experiment" / "paper_speat.yaml").read_text())["hydra"]["sweeper"]["params"][
    "upstream"
].split(",")


def upstream_config(name: str, overrides: dict):
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def child(name: str, overrides: dict, seconds: float) -> None:
    """In a fresh process: warm extraction of a 1 s clip, then one of ``seconds``; prints JSON."""
    import logging
    import resource
    import tempfile

    import hydra.utils
    import numpy as np
    import pytorch_lightning as pl
    import soundfile as sf

    from speechbias.features.extraction import extract_statistics

    logging.disable(logging.WARNING)
    upstream = hydra.utils.instantiate(upstream_config(name, overrides))
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, length in enumerate((1.0, seconds)):
            paths.append(str(Path(tmp) / f"clip{i}.wav"))
            noise = 0.1 * np.random.default_rng(i).standard_normal(int(length * 16_000))
            sf.write(paths[-1], noise.astype("float32"), 16_000)
        for i, path in enumerate(paths):
            if i == 1:
                before = _rss()
            trainer = pl.Trainer(
                accelerator="cpu",
                devices=1,
                logger=False,
                enable_checkpointing=False,
                enable_model_summary=False,
                enable_progress_bar=False,
            )
            extract_statistics(upstream, [path], Path(tmp) / "cache", trainer, batch_size=1)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"before": before, "peak": peak}))


def measure(name: str, overrides: dict, seconds: float) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, json.dumps(overrides), str(seconds)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_manifest(folder: Path, seconds: int) -> Path:
    """40 clips of 0.25 s (10 per role) and, when ``seconds``, one clip that long (16-bit WAV, written a
    minute at a time)."""
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    (folder / "audio").mkdir(parents=True, exist_ok=True)
    rows = []
    for role in "XYAB":
        for i in range(10):
            path = folder / "audio" / f"{role}{i}.wav"
            sf.write(path, (0.1 * rng.standard_normal(4_000)).astype("float32"), 16_000)
            rows.append(f"{role}{i},{path},{role}")
    if seconds:
        path = folder / "audio" / "long.wav"
        with sf.SoundFile(path, "w", samplerate=16_000, channels=1, subtype="PCM_16") as out:
            for start in range(0, seconds, 60):
                out.write((0.1 * rng.standard_normal(16_000 * min(60, seconds - start))).astype("float32"))
        rows.append(f"long,{path},X")
    manifest = folder / "manifest.csv"
    manifest.write_text("clip_id,path,role\n" + "\n".join(rows) + "\n")
    return manifest


def run_peak(upstream: str, seconds: int, folder: Path) -> int:
    """Peak RSS (bytes) of a whole ``python evaluate.py`` run of ``upstream`` over :func:`write_manifest`'s
    clips, fresh cache, the limit set out of the way (os.wait4: this child's own ru_maxrss)."""
    folder.mkdir(parents=True)
    manifest = write_manifest(folder, seconds)
    command = [
        sys.executable,
        str(REPO / "evaluate.py"),
        f"upstream={upstream}",
        "logger=none",
        f"bias_test.manifest={manifest}",
        f"hydra.run.dir={folder / 'run'}",
        f"paths.cache_dir={folder / 'cache'}",
        "speat.n_permutations=100",
        "speat.per_layer=false",
        "extraction.max_clip_seconds=1e6",
    ]
    child_process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder)
    _, status, usage = os.wait4(child_process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {child_process.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, nargs="+", default=[5, 20, 60, 120, 300])
    ap.add_argument("--quick", action="store_true", help="only the limits of the shipped models")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], json.loads(args.child[1]), float(args.child[2]))
        return

    from speechbias.features.clip_memory import MARGIN, clip_limit, clip_bytes, peak_bytes
    from speechbias.upstream.architecture import architecture_of

    if not args.quick:
        print(f"measured on CPU, {os.cpu_count()} cores; MARGIN={MARGIN} is in every prediction")
        print(
            f"{'upstream':24s} {'s':>5s} {'clip: predicted':>16s} {'measured':>9s} {'ratio':>6s}   "
            f"{'peak: predicted':>16s} {'measured':>9s} {'ratio':>6s}"
        )
        worst = float("inf")
        for label, name, overrides, longest in CASES:
            arch = architecture_of(upstream_config(name, overrides))
            for seconds in [s for s in args.seconds if s <= longest]:
                m = measure(name, overrides, seconds)
                grown = max(m["peak"] - m["before"], 1)
                predicted = clip_bytes(arch, seconds)
                peak = peak_bytes(arch, seconds)
                worst = min(worst, predicted / grown)
                print(
                    f"{label:24s} {seconds:5.0f} {predicted / MIB:12.0f} MiB {grown / MIB:5.0f} MiB "
                    f"{predicted / grown:6.2f}   {peak / MIB:12.0f} MiB {m['peak'] / MIB:5.0f} MiB "
                    f"{peak / m['peak']:6.2f}"
                )
        print(f"smallest ratio of predicted to measured per-clip memory: {worst:.2f} (>= 1: a bound)")

        import tempfile

        print(f"\nwhole evaluate.py runs, batches of {RUN_BATCH}: 40 clips of 0.25 s and one long clip")
        print(f"{'upstream':24s} {'s':>5s} {'peak: predicted':>16s} {'measured':>9s} {'ratio':>6s}")
        with tempfile.TemporaryDirectory() as tmp:
            for name, lengths in RUNS:
                arch = architecture_of(upstream_config(name, {}))
                base = run_peak(name, 0, Path(tmp) / f"{name}_0")
                print(f"{name:24s} {'none':>5s} {peak_bytes(arch, 0) / MIB:12.0f} MiB {base / MIB:5.0f} MiB")
                for seconds in lengths:
                    measured = run_peak(name, seconds, Path(tmp) / f"{name}_{seconds}")
                    predicted = peak_bytes(arch, seconds, RUN_BATCH)
                    ratio = predicted / measured
                    print(f"{name:24s} {seconds:5d} {predicted / MIB:12.0f} MiB {measured / MIB:5.0f} MiB {ratio:6.2f}")

    from omegaconf import OmegaConf

    print("\nextraction.max_clip_seconds=auto for the shipped models (seconds; batch = extraction.batch_size):")
    columns = [(24, 2), (80, 2), (80, 8)]
    print(f"{'upstream':22s} " + " ".join(f"{f'{gib} GiB, batch {b}':>17s}" for gib, b in columns) + "   sizes from")
    for name in SHIPPED:
        limits = []
        for gib, batch in columns:
            cfg = OmegaConf.create(
                {
                    "upstream": OmegaConf.to_container(upstream_config(name, {})),
                    "extraction": {"memory_gib": gib, "batch_size": batch},
                }
            )
            limits.append(clip_limit(cfg).seconds)
        source = architecture_of(upstream_config(name, {})).source
        print(f"{name:22s} " + " ".join(f"{s:17d}" for s in limits) + f"   {source}")


if __name__ == "__main__":
    main()
