"""SpEAT: effect size d and one-sided permutation p of targets X vs Y on attributes A vs B."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from speechbias.stats.associations import effect_size_from_associations, target_associations
from speechbias.stats.permutation import permutation_test
from speechbias.stats.validation import check_count, read_only


@dataclass(frozen=True, eq=False)  # holds arrays/tables: compare fields, not objects
class SpeatResult:
    """One SpEAT test and what produced it.

    ``d``: effect size (> 0: X closer to A than Y is). ``p``: one-sided permutation p-value
    (conventions in :mod:`speechbias.stats.permutation`). ``statistic``: sum of s over X.
    ``n_permutations``: partitions evaluated (all of them when ``exact``). ``seed``: the PCG64 seed
    of the sampled test (None when exact); ``layout``: how its partitions were drawn
    (:data:`~speechbias.stats.permutation.STATISTICS_LAYOUT`; None when exact). ``s_x`` (n_x,), ``s_y`` (n_y,): per-target associations
    s(w) = mean cos(w, A) - mean cos(w, B), read-only.
    """

    d: float
    p: float
    statistic: float
    n_x: int
    n_y: int
    n_a: int
    n_b: int
    n_permutations: int
    exact: bool
    seed: int | None
    s_x: np.ndarray
    s_y: np.ndarray
    layout: int | None = None

    def as_dict(self) -> dict:
        """Scalar fields only (for tables and loggers), in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("s_x", "s_y")}


def speat(X, Y, A, B, n_permutations: int = 1_000_000, seed: int | None = 0) -> SpeatResult:
    """Run one SpEAT test.

    ``X`` (n_x, D), ``Y`` (n_y, D): target embeddings, at least 2 per group (sizes may differ).
    ``A`` (n_a, D), ``B`` (n_b, D): attribute embeddings (pleasant, unpleasant). Rows must be finite
    and non-zero. Numpy arrays or anything convertible (lists, CPU torch tensors).
    ``n_permutations``: exact enumeration when there are at most this many partitions, else this
    many random partitions from ``np.random.default_rng(seed)``; ``seed=None`` draws and records one.
    """
    s_x, s_y, noise = target_associations(X, Y, A, B)
    n_permutations = check_count(n_permutations, "n_permutations")
    d = effect_size_from_associations(s_x, s_y, noise)
    test = permutation_test(s_x, s_y, n_permutations=n_permutations, seed=seed)
    return SpeatResult(
        d=d,
        p=test.p,
        statistic=test.statistic,
        n_x=test.n_x,
        n_y=test.n_y,
        n_a=np.shape(A)[0],  # rows: target_associations checked that A and B are 2-D
        n_b=np.shape(B)[0],
        n_permutations=test.n_permutations,
        exact=test.exact,
        seed=test.seed,
        s_x=read_only(s_x),
        s_y=read_only(s_y),
        layout=test.layout,
    )
