"""Mixed-effects Poisson regression of word errors with one random intercept per speaker.

Model (Fair-Speech, Veliche et al. 2024; after Liu et al., "Model-based approach for measuring the
fairness in ASR", 2022)::

    errors_ij ~ Poisson(lambda_ij)
    log lambda_ij = log(words_ij) + mu_group(ij) + c_ij' gamma + r_i,     r_i ~ N(0, sigma^2)

``i`` is the speaker, ``j`` the utterance, ``words`` the number of reference words (the offset),
``mu`` one log-WER per group (cell-means coding, no intercept), ``c`` optional covariates.
``exp(mu_a - mu_b)`` is the WER ratio of group a to group b for the same speaker effect and
covariates. Fitted by maximum likelihood with the marginal likelihood's per-speaker 1-D integrals
approximated by the Laplace method (``n_agq=1``) or adaptive Gauss-Hermite quadrature
(``n_agq>1``), exactly as ``lme4::glmer(..., nAGQ=n_agq)`` defines them.

Why hand-written: no maintained Python library fits this model by maximum likelihood.
statsmodels' ``PoissonBayesMixedGLM`` is a variational-Bayes estimator without an offset (its
posterior SDs are far too small), pymer4 calls R, and fitting a Gaussian mixed model to per-utterance
WER (as ASR-FairBench does) is a different model. With one scalar random intercept the likelihood
reduces exactly to per-speaker sufficient statistics: given the fixed effects, speaker i's
integral depends only on ``Y_i`` (its total errors) and ``a_i = log sum_j exp(eta_ij)``, and the
conditional mode has a closed form through the Wright omega function, so the objective and its
analytic gradient cost O(units) numpy operations; a damped Newton loop maximises it.

Modules, in the order the data flows: ``design`` (input checks, utterances -> speaker x design-row
units), ``likelihood`` (Laplace / AGHQ marginal log-likelihood and gradient), ``newton`` (damped
Newton maximiser), ``poisson_glm`` (the model without a speaker effect, by statsmodels), ``fit``
(:func:`fit_poisson_glmm`), ``bootstrap`` (:func:`bootstrap_wer_ratios`: speaker cluster bootstrap,
or utterance bootstrap without speakers), ``results`` (the result types, :func:`pairwise_wer_ratios`).

Conventions: ``mu`` and ``gamma`` on the log scale; ``sigma`` is the SD of the speaker intercept
(log scale). Log-likelihoods are full Poisson log-likelihoods (including ``-log y!``).
"""

from speechbias.stats.glmm.bootstrap import bootstrap_wer_ratios
from speechbias.stats.glmm.fit import fit_poisson_glmm
from speechbias.stats.glmm.results import PoissonGLMMFit, RatioBootstrap, pairwise_wer_ratios

__all__ = [
    "PoissonGLMMFit",
    "RatioBootstrap",
    "fit_poisson_glmm",
    "pairwise_wer_ratios",
    "bootstrap_wer_ratios",
]
