"""speechbias's Poisson GLMM against R's lme4::glmer on the same simulated data (marker: reference).

Skipped when Rscript or lme4 is missing (CI installs r-base-core and r-cran-lme4). Same model and
same approximation on both sides: nAGQ=1 is the Laplace approximation, nAGQ=k adaptive
Gauss-Hermite quadrature with k nodes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from glmm_sim import simulate_errors  # noqa: E402

from speechbias.stats.glmm import fit_poisson_glmm  # noqa: E402

pytestmark = pytest.mark.reference

R_FIT = r"""
suppressMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1]); d$group <- factor(d$group); d$speaker <- factor(d$speaker)
form <- if (args[3] == "x") errors ~ 0 + group + x + (1 | speaker) + offset(log(words)) else
  errors ~ 0 + group + (1 | speaker) + offset(log(words))
f <- glmer(form, data = d, family = poisson, nAGQ = as.integer(args[2]),
           control = glmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5)))
cat("FIXEF", format(fixef(f), digits = 15), "\n")
cat("SIGMA", format(getME(f, "theta"), digits = 15), "\n")
"""


def _have_lme4() -> bool:
    if shutil.which("Rscript") is None:
        return False
    return subprocess.run(["Rscript", "-e", "suppressMessages(library(lme4))"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not _have_lme4(), reason="Rscript with lme4 not installed (apt-get install r-base-core r-cran-lme4)"
)
@pytest.mark.parametrize("n_agq, covariate", [(1, False), (7, False), (1, True), (9, True)])
def test_matches_glmer(tmp_path, n_agq, covariate):
    df = simulate_errors(
        [0.06, 0.1, 0.18],
        speakers_per_group=25,
        utts_per_speaker=(5, 25),
        sigma=0.5,
        seed=21,
        covariate_effect=0.2 if covariate else None,
    )
    csv = tmp_path / "errors.csv"
    df.to_csv(csv, index=False)
    script = tmp_path / "fit.R"
    script.write_text(R_FIT)
    out = subprocess.run(
        ["Rscript", str(script), str(csv), str(n_agq), "x" if covariate else "-"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: [float(v) for v in ln.split()[1:]] for ln in out.stdout.splitlines() if ln.strip()}
    r_fixef, r_sigma = np.array(lines["FIXEF"]), lines["SIGMA"][0]

    fit = fit_poisson_glmm(
        df.errors, df.words, df.group, df.speaker, covariates=df[["x"]] if covariate else None, n_agq=n_agq
    )
    assert fit.converged
    ours = np.r_[fit.mu, fit.gamma]  # R orders fixef as group levels (sorted) then x, like ours
    np.testing.assert_allclose(ours, r_fixef, rtol=1e-3)
    assert fit.sigma == pytest.approx(r_sigma, rel=1e-3)
