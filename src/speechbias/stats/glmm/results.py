"""What a WER-model fit and a ratio bootstrap return, and the pairwise ratios a fit implies.

Conventions: ``mu`` (one per group) and ``gamma`` (one per covariate) on the log scale; ``sigma``
is the SD of the speaker intercept (log scale); ``loglik`` is the full Poisson log-likelihood
(including ``-log y!``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class PoissonGLMMFit:
    """A fitted WER model. ``mu[g]`` is the log WER of ``groups[g]`` (speaker effect 0, covariates 0)."""

    groups: tuple[str, ...]
    mu: np.ndarray
    covariate_names: tuple[str, ...]
    gamma: np.ndarray
    sigma: float  # SD of the speaker intercept; nan when fitted without a speaker effect
    loglik: float
    converged: bool
    message: str
    method: str  # "laplace", "aghq(<n>)" or "poisson_glm"
    n_obs: int
    n_speakers: int  # 0 when fitted without a speaker effect
    n_speakers_per_group: dict = field(default_factory=dict)
    n_obs_per_group: dict = field(default_factory=dict)
    n_iter: int = 0
    # negative Hessian of the log-likelihood at the estimate, over (mu, gamma, sigma); None for the GLM
    neg_hessian: np.ndarray | None = field(default=None, repr=False, compare=False)

    def wald_se(self) -> np.ndarray:
        """Asymptotic standard errors of (mu, gamma, sigma) from the observed information."""
        if self.neg_hessian is None:
            raise ValueError("no Hessian stored for this fit (Poisson GLM)")
        return np.sqrt(np.diag(np.linalg.inv(self.neg_hessian)))

    @property
    def has_speaker_effect(self) -> bool:
        return self.method != "poisson_glm"

    def ratio(self, a: str, b: str) -> float:
        """WER ratio exp(mu_a - mu_b) of group ``a`` to group ``b``."""
        ia, ib = self.groups.index(a), self.groups.index(b)
        return float(np.exp(self.mu[ia] - self.mu[ib]))

    def params(self) -> np.ndarray:
        """Flat parameter vector (mu, gamma, sigma) as used for warm starts."""
        s = 0.0 if not np.isfinite(self.sigma) else self.sigma
        return np.concatenate([self.mu, self.gamma, [s]])


@dataclass(frozen=True)
class RatioBootstrap:
    """Pairwise WER ratios with percentile bootstrap CIs.

    ``table`` columns: group_a, group_b, ratio (full-data estimate), ci_low, ci_high, significant
    (CI excludes 1 and is not degenerate), degenerate (the CI is not finite or has zero width, or a
    group has fewer than two resampling units, so the resampling cannot show its variability),
    se_log_ratio (bootstrap SD of mu_a - mu_b). ``replicates`` is (n_ok, n_groups) of bootstrap
    mu estimates.
    """

    table: pd.DataFrame
    replicates: np.ndarray
    n_resamples: int
    n_failed: int
    failures: dict
    seed: int
    confidence: float
    resampling: str


def pairwise_wer_ratios(fit: PoissonGLMMFit) -> pd.DataFrame:
    """All unordered group pairs (in ``fit.groups`` order) with ratio = exp(mu_a - mu_b)."""
    rows = [{"group_a": a, "group_b": b, "ratio": fit.ratio(a, b)} for a, b in itertools.combinations(fit.groups, 2)]
    return pd.DataFrame(rows, columns=["group_a", "group_b", "ratio"])
