"""Benchmark: speaker random-intercept Poisson GLMM at Fair-Speech scale, speechbias vs. R lme4::glmer.

Simulates 26,471 utterances from 593 speakers in 7 groups (the Fair-Speech ethnicity split sizes,
scaled), then measures in one run:

* the speechbias ML fit (from per-utterance arrays) and the same fit by ``glmer`` (time measured
  inside R around the ``glmer`` call only, so R start-up and CSV reading are excluded);
* the 1,000-replicate speaker bootstrap (``bootstrap_wer_ratios``) with 1 and 2 worker processes.

Usage: ``python benchmarks/glmm_bench.py [--n-agq 1] [--resamples 1000] [--repeats 3]``.
Prints estimates side by side (they must agree) and the timings with their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from speechbias.stats.glmm import bootstrap_wer_ratios, fit_poisson_glmm  # noqa: E402

N_UTTERANCES = 26_471
N_SPEAKERS = 593
# speakers per group, proportional to Fair-Speech's ethnicity utterance counts (sums to 593)
GROUP_SPEAKERS = [175, 126, 104, 86, 63, 22, 17]
TRUE_MU = np.log([0.08, 0.09, 0.10, 0.11, 0.12, 0.14, 0.16])
TRUE_SIGMA = 0.45

R_SCRIPT = r"""
suppressMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1]); d$group <- factor(d$group); d$speaker <- factor(d$speaker)
nagq <- as.integer(args[2]); reps <- as.integer(args[3])
times <- numeric(reps)
for (i in seq_len(reps)) {
  t0 <- proc.time()[["elapsed"]]
  f <- glmer(errors ~ 0 + group + (1 | speaker) + offset(log(words)), data = d, family = poisson, nAGQ = nagq)
  times[i] <- proc.time()[["elapsed"]] - t0
}
cat("TIMES", times, "\n")
cat("FIXEF", format(fixef(f), digits = 12), "\n")
cat("SIGMA", format(getME(f, "theta"), digits = 12), "\n")
"""


def simulate(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    assert sum(GROUP_SPEAKERS) == N_SPEAKERS
    # utterances per speaker: multinomial around 26471/593 ~ 44.6, at least 5
    n_per = 5 + rng.multinomial(N_UTTERANCES - 5 * N_SPEAKERS, np.full(N_SPEAKERS, 1.0 / N_SPEAKERS))
    group = np.repeat(np.arange(len(GROUP_SPEAKERS)), GROUP_SPEAKERS)
    r = rng.normal(0.0, TRUE_SIGMA, N_SPEAKERS)
    spk = np.repeat(np.arange(N_SPEAKERS), n_per)
    words = rng.integers(3, 16, size=spk.size)
    errors = rng.poisson(words * np.exp(TRUE_MU[group[spk]] + r[spk]))
    return pd.DataFrame(
        {
            "group": [f"g{g}" for g in group[spk]],
            "speaker": [f"s{s:03d}" for s in spk],
            "words": words,
            "errors": errors,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-agq", type=int, default=1, help="1 = Laplace (glmer default), >1 = AGHQ nodes")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="fit timings: best of this many")
    args = ap.parse_args()

    df = simulate()
    print(
        f"data: {len(df)} utterances, {df.speaker.nunique()} speakers, {df.group.nunique()} groups; "
        f"n_agq={args.n_agq}; cpus={os.cpu_count()}; load average {os.getloadavg()[0]:.2f} "
        "(machine shared: timings include contention)"
    )

    py_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fit = fit_poisson_glmm(
            df.errors.to_numpy(), df.words.to_numpy(), df.group.to_numpy(), df.speaker.to_numpy(), n_agq=args.n_agq
        )
        py_times.append(time.perf_counter() - t0)
    py_fit = min(py_times)

    r_fit = None
    r_mu = r_sigma = None
    if shutil.which("Rscript"):
        with tempfile.TemporaryDirectory() as tmp:
            csv = Path(tmp) / "d.csv"
            df.to_csv(csv, index=False)
            script = Path(tmp) / "fit.R"
            script.write_text(R_SCRIPT)
            proc = subprocess.run(
                ["Rscript", str(script), str(csv), str(args.n_agq), str(args.repeats)],
                capture_output=True,
                text=True,
                timeout=1800,
            )
        if proc.returncode == 0:
            lines = {ln.split()[0]: ln.split()[1:] for ln in proc.stdout.splitlines() if ln.strip()}
            r_fit = min(float(t) for t in lines["TIMES"])
            r_mu = np.array([float(v) for v in lines["FIXEF"]])
            r_sigma = float(lines["SIGMA"][0])
        else:
            print("R/lme4 failed:", proc.stderr.strip().splitlines()[-1:] or proc.returncode)
    else:
        print("Rscript not found: glmer column skipped")

    print("\nestimates            speechbias        glmer     rel.diff    truth")
    for g, name in enumerate(fit.groups):
        rv = r_mu[g] if r_mu is not None else float("nan")
        print(
            f"  mu[{name}]          {fit.mu[g]:12.6f} {rv:12.6f} {abs(fit.mu[g] - rv) / abs(rv):10.2e} "
            f"{TRUE_MU[g]:9.4f}"
        )
    rs = r_sigma if r_sigma is not None else float("nan")
    print(f"  sigma            {fit.sigma:12.6f} {rs:12.6f} {abs(fit.sigma - rs) / rs:10.2e} {TRUE_SIGMA:9.4f}")
    print(f"  converged: {fit.converged} ({fit.n_iter} Newton iterations)")

    print(f"\nfit time (best of {args.repeats}):  speechbias {py_fit:.4f} s", end="")
    if r_fit is not None:
        print(f"   glmer {r_fit:.4f} s   glmer/speechbias = {r_fit / py_fit:.1f}x")
    else:
        print()

    for n_jobs in (1, 2):
        t0 = time.perf_counter()
        boot = bootstrap_wer_ratios(
            df.errors.to_numpy(),
            df.words.to_numpy(),
            df.group.to_numpy(),
            df.speaker.to_numpy(),
            fit=fit,
            n_resamples=args.resamples,
            seed=0,
            n_agq=args.n_agq,
            n_jobs=n_jobs,
        )
        dt = time.perf_counter() - t0
        print(
            f"speaker bootstrap, {args.resamples} replicates, n_jobs={n_jobs}: {dt:.2f} s "
            f"({boot.n_failed} failed; goal < 300 s on 2 cores)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
