"""How often a warm run reads the feature cache: index-record reads and entry verifications per clip.

Runs ``evaluate.py``'s default (SpEAT, demo_voice: 40 clips, fbank) in-process twice into a fresh
cache (cold, then warm) and counts, during the warm run, ``FeatureCache.lookup_audio`` calls (one
index-record read each), verified entry reads (``FeatureCache._read``, which checks the xxh3 checksum)
and reads of the run's own results files back (``pandas.read_json``/``read_csv`` of files in the run
folder). Prints them in all and per clip. Usage: python benchmarks/cache_reads.py [overrides ...]
(e.g. ``train.py``'s config: --config train). Counts, not times: they do not depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from unittest import mock

import pandas as pd
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parents[1]


def count_warm_reads(config: str, overrides: list[str], tmp: Path) -> tuple[Counter, int]:
    """(counts of the warm run, number of clips) for ``config`` (evaluate or train) with ``overrides``."""
    from speechbias.launch.entry import run_task
    from speechbias.features.cache import FeatureCache

    def run(out: str) -> None:
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose(
                config,
                overrides=[
                    f"paths.output_dir={tmp / out}",
                    f"paths.cache_dir={tmp / 'cache'}",
                    f"paths.root_dir={REPO}",
                    "logger=none",
                    "trainer.enable_progress_bar=false",
                    *overrides,
                ],
            )
        run_task(cfg)

    run("cold")
    counts: Counter = Counter()
    lookup, read = FeatureCache.lookup_audio, FeatureCache._read
    read_json, read_csv = pd.read_json, pd.read_csv

    def counted(key, fn):
        def wrapper(*args, **kwargs):
            counts[key] += 1
            return fn(*args, **kwargs)

        return wrapper

    def own_results(fn):
        def wrapper(path, *args, **kwargs):
            if str(tmp / "warm") in str(path):
                counts["results files read back"] += 1
            return fn(path, *args, **kwargs)

        return wrapper

    with (
        mock.patch.object(FeatureCache, "lookup_audio", counted("index-record reads", lookup)),
        mock.patch.object(FeatureCache, "_read", counted("entry verifications", read)),
        mock.patch.object(pd, "read_json", own_results(read_json)),
        mock.patch.object(pd, "read_csv", own_results(read_csv)),
    ):
        run("warm")
    clips = len(list((tmp / "cache" / "audio_index").rglob("*.json")))
    return counts, clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="evaluate", choices=["evaluate", "train"])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    overrides = args.overrides or (
        ["speat.n_permutations=2000", "speat.per_layer=false"] if args.config == "evaluate" else ["max_steps=20"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        counts, clips = count_warm_reads(args.config, overrides, Path(tmp))
    print(f"warm {args.config}.py run over {clips} clips ({' '.join(overrides)}):")
    for key in ("index-record reads", "entry verifications", "results files read back"):
        print(f"  {key:<24} {counts[key]:>5}  ({counts[key] / max(clips, 1):.2f} per clip)")


if __name__ == "__main__":
    sys.exit(main())
