"""Statistics of all four methods: pure, vectorised, seeded functions on arrays (no I/O).

SpEAT: :func:`speat` (effect size d + one-sided permutation p), :func:`effect_size`,
:func:`association`, :func:`permutation_test`, :func:`bootstrap_se` (SE of d vs number of
targets). Two-sample effect size: :func:`cohens_d`. ASR disparities: :func:`fit_poisson_glmm` (mixed-effects
Poisson by ML), :func:`pairwise_wer_ratios`, :func:`bootstrap_wer_ratios` (speaker cluster bootstrap). Families of tests: :func:`correct_pvalues`,
:func:`two_way_anova`. Congruence with humans and downstream: :data:`HUMAN_IAT_D`,
:func:`sign_congruence`, :func:`sign_agreement`. Bad input raises :class:`StatsInputError`
(a ``ValueError``) naming the argument. Random numbers: ``np.random.default_rng(seed)`` (PCG64);
every result records its seed, group sizes and number of permutations or resamples.
A whole sweep's tables (corrected significance, ANOVA, congruence, the paper comparison), from
results tables to results tables: :mod:`speechbias.stats.sweep_analysis`.

Names are imported on first use (PEP 562 ``__getattr__``): a process that needs the SpEAT
statistics does not pay for statsmodels, scipy.stats and pandas (1.5 s of start-up). No submodule is
named like one of these names: importing a submodule sets the package attribute of its name, which
would then shadow the lazily imported function (``from speechbias.stats import association`` gave the
module once ``speechbias.stats.association`` had been imported by another module).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HOME = {
    "AnovaResult": "anova",
    "two_way_anova": "anova",
    "association": "associations",
    "effect_size": "associations",
    "effect_size_from_associations": "associations",
    "BootstrapSEResult": "bootstrap",
    "bootstrap_se": "bootstrap",
    "CohensDResult": "cohen",
    "cohens_d": "cohen",
    "HUMAN_IAT_D": "congruence",
    "SignCongruence": "congruence",
    "sign_agreement": "congruence",
    "sign_congruence": "congruence",
    "CorrectedPValues": "corrections",
    "correct_pvalues": "corrections",
    "PoissonGLMMFit": "glmm",
    "RatioBootstrap": "glmm",
    "bootstrap_wer_ratios": "glmm",
    "fit_poisson_glmm": "glmm",
    "pairwise_wer_ratios": "glmm",
    "PermutationTestResult": "permutation",
    "permutation_test": "permutation",
    "SpeatResult": "speat_statistic",
    "speat": "speat_statistic",
    "StatsInputError": "validation",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_HOME))


if TYPE_CHECKING:
    from speechbias.stats.anova import AnovaResult, two_way_anova
    from speechbias.stats.associations import association, effect_size, effect_size_from_associations
    from speechbias.stats.bootstrap import BootstrapSEResult, bootstrap_se
    from speechbias.stats.cohen import CohensDResult, cohens_d
    from speechbias.stats.congruence import HUMAN_IAT_D, SignCongruence, sign_agreement, sign_congruence
    from speechbias.stats.corrections import CorrectedPValues, correct_pvalues
    from speechbias.stats.glmm import (
        PoissonGLMMFit,
        RatioBootstrap,
        bootstrap_wer_ratios,
        fit_poisson_glmm,
        pairwise_wer_ratios,
    )
    from speechbias.stats.permutation import PermutationTestResult, permutation_test
    from speechbias.stats.speat_statistic import SpeatResult, speat
    from speechbias.stats.validation import StatsInputError

__all__ = [
    "HUMAN_IAT_D",
    "AnovaResult",
    "BootstrapSEResult",
    "CohensDResult",
    "CorrectedPValues",
    "PermutationTestResult",
    "PoissonGLMMFit",
    "RatioBootstrap",
    "SignCongruence",
    "SpeatResult",
    "StatsInputError",
    "association",
    "bootstrap_se",
    "bootstrap_wer_ratios",
    "cohens_d",
    "correct_pvalues",
    "effect_size",
    "effect_size_from_associations",
    "fit_poisson_glmm",
    "pairwise_wer_ratios",
    "permutation_test",
    "sign_agreement",
    "sign_congruence",
    "speat",
    "two_way_anova",
]
