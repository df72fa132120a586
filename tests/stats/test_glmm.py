"""Speaker random-intercept Poisson GLMM: likelihood, gradient, estimates and speaker bootstrap.

Every check is against an independent derivation written here: the marginal likelihood by
numerical integration (scipy.integrate.quad) or a per-speaker Laplace approximation found with a
scalar optimiser, finite differences, closed-form Poisson GLM estimates, or an explicit
duplicated-speaker dataset.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from glmm_sim import simulate_errors  # noqa: E402

from speechbias.stats.glmm import design, likelihood, poisson_glm  # noqa: E402
from speechbias.stats.glmm import bootstrap_wer_ratios, fit_poisson_glmm, pairwise_wer_ratios  # noqa: E402


def _speaker_integrand_log(b, y, w, eta, sigma):
    """log [prod_j Pois(y_j | w_j exp(eta_j + b)) * N(b; 0, sigma^2)] for one speaker."""
    lam = w * np.exp(eta + b)
    return float(np.sum(y * np.log(lam) - lam - special.gammaln(y + 1)) + stats.norm.logpdf(b, 0, sigma))


def _exact_loglik(df, mu: dict, sigma: float, gamma=0.0) -> float:
    """Marginal log-likelihood by adaptive quadrature of each speaker's integral over b."""
    total = 0.0
    for _, d in df.groupby("speaker"):
        y, w = d.errors.to_numpy(float), d.words.to_numpy(float)
        eta = np.array([mu[g] for g in d.group]) + gamma * d.x.to_numpy()
        mode = optimize.minimize_scalar(lambda b, y=y, w=w, eta=eta: -_speaker_integrand_log(b, y, w, eta, sigma)).x
        peak = _speaker_integrand_log(mode, y, w, eta, sigma)
        val, _ = integrate.quad(
            lambda b, y=y, w=w, eta=eta, peak=peak: math.exp(_speaker_integrand_log(b, y, w, eta, sigma) - peak),
            mode - 12 * sigma,
            mode + 12 * sigma,
            epsabs=0,
            epsrel=1e-12,
            limit=200,
        )
        total += peak + math.log(val)
    return total


def _laplace_loglik(df, mu: dict, sigma: float) -> float:
    """Per-speaker Laplace approximation in b: g(b_hat) + 0.5 log(2 pi / -g''(b_hat))."""
    total = 0.0
    for _, d in df.groupby("speaker"):
        y, w = d.errors.to_numpy(float), d.words.to_numpy(float)
        eta = np.array([mu[g] for g in d.group])
        mode = optimize.minimize_scalar(
            lambda b, y=y, w=w, eta=eta: -_speaker_integrand_log(b, y, w, eta, sigma), bracket=(-1, 1), tol=1e-12
        ).x
        curv = float(np.sum(w * np.exp(eta + mode))) + 1.0 / sigma**2
        total += _speaker_integrand_log(mode, y, w, eta, sigma) + 0.5 * math.log(2 * math.pi / curv)
    return total


@pytest.fixture(scope="module")
def small_data():
    return simulate_errors([0.1, 0.2], speakers_per_group=8, utts_per_speaker=(3, 8), sigma=0.6, seed=3)


def test_aghq_loglik_matches_numerical_integration(small_data):
    fit = fit_poisson_glmm(small_data.errors, small_data.words, small_data.group, small_data.speaker, n_agq=25)
    mu = dict(zip(fit.groups, fit.mu))
    exact = _exact_loglik(small_data, mu, fit.sigma)
    assert fit.loglik == pytest.approx(exact, rel=1e-9, abs=1e-7)
    assert fit.method == "aghq(25)" and fit.converged


def test_laplace_loglik_matches_independent_laplace(small_data):
    fit = fit_poisson_glmm(small_data.errors, small_data.words, small_data.group, small_data.speaker, n_agq=1)
    mu = dict(zip(fit.groups, fit.mu))
    assert fit.loglik == pytest.approx(_laplace_loglik(small_data, mu, fit.sigma), rel=1e-9, abs=1e-7)
    # the ML estimate: no nearby point has a higher (independently computed) Laplace likelihood
    base = _laplace_loglik(small_data, mu, fit.sigma)
    for g in fit.groups:
        for step in (-1e-3, 1e-3):
            mu2 = dict(mu)
            mu2[g] += step
            assert _laplace_loglik(small_data, mu2, fit.sigma) < base
    for step in (-1e-3, 1e-3):
        assert _laplace_loglik(small_data, mu, fit.sigma + step) < base


@pytest.mark.parametrize("n_agq", [1, 5])
def test_gradient_matches_finite_differences(n_agq):
    df = simulate_errors([0.05, 0.1, 0.3], speakers_per_group=6, sigma=0.7, seed=4, covariate_effect=0.3)
    y, w = df.errors.to_numpy(float), df.words.to_numpy(float)
    g_codes, _ = design.label_codes(df.group, "group")
    s_codes, _ = design.label_codes(df.speaker, "speaker")
    units = design.reduce_to_units(y, w, g_codes, 3, s_codes, df[["x"]].to_numpy())
    z, log_wz = likelihood.gauss_hermite_rule(n_agq)
    weights = np.random.default_rng(0).integers(0, 3, size=units.n_clusters).astype(float)
    for x in ([-2.5, -2.0, -1.0, 0.2, 0.6], [-3.0, -2.2, -1.5, -0.4, 1.3], [-2.0, -2.0, -2.0, 0.0, -0.4]):
        x = np.array(x)
        _, grad = likelihood.loglik_and_grad(x, units, weights, z, log_wz)
        num = np.array(
            [
                (
                    likelihood.loglik_and_grad(x + e, units, weights, z, log_wz)[0]
                    - likelihood.loglik_and_grad(x - e, units, weights, z, log_wz)[0]
                )
                / 2e-6
                for e in np.eye(x.size) * 1e-6
            ]
        )
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-5)


def test_recovers_known_ratios():
    truth = np.array([0.08, 0.12, 0.2, 0.1])
    df = simulate_errors(truth, speakers_per_group=60, utts_per_speaker=(15, 30), sigma=0.4, seed=11)
    fit = fit_poisson_glmm(df.errors, df.words, df.group, df.speaker)
    assert fit.converged
    se = fit.wald_se()
    np.testing.assert_array_less(np.abs(fit.mu - np.log(truth)), 4 * se[:4])
    assert abs(fit.sigma - 0.4) < 4 * se[-1]
    ratios = pairwise_wer_ratios(fit)
    assert len(ratios) == 6
    for row in ratios.itertuples():
        ia, ib = int(row.group_a[1]), int(row.group_b[1])
        assert row.ratio == pytest.approx(math.exp(fit.mu[ia] - fit.mu[ib]))
        assert abs(math.log(row.ratio) - math.log(truth[ia] / truth[ib])) < 4 * math.hypot(se[ia], se[ib])


def test_covariate_effect_recovered():
    df = simulate_errors(
        [0.1, 0.15], speakers_per_group=50, utts_per_speaker=(10, 20), sigma=0.3, seed=5, covariate_effect=0.25
    )
    fit = fit_poisson_glmm(df.errors, df.words, df.group, df.speaker, covariates=df[["x"]])
    assert fit.covariate_names == ("x",)
    assert abs(fit.gamma[0] - 0.25) < 4 * fit.wald_se()[2]


def test_no_speaker_is_poisson_glm_closed_form():
    df = simulate_errors([0.1, 0.2, 0.15], speakers_per_group=5, seed=2)
    fit = fit_poisson_glmm(df.errors, df.words, df.group, speaker=None)
    assert fit.method == "poisson_glm" and not fit.has_speaker_effect and math.isnan(fit.sigma)
    for g, mu in zip(fit.groups, fit.mu):
        d = df[df.group == g]
        assert mu == pytest.approx(math.log(d.errors.sum() / d.words.sum()), rel=1e-9)
    # with a covariate: maximise the Poisson log-likelihood written out here
    fit_c = fit_poisson_glmm(df.errors, df.words, df.group, speaker=None, covariates=df[["x"]])
    gidx = df.group.map({g: k for k, g in enumerate(sorted(df.group.unique()))}).to_numpy()

    def nll(p):
        lam = df.words.to_numpy() * np.exp(p[:3][gidx] + p[3] * df.x.to_numpy())
        return -np.sum(df.errors.to_numpy() * np.log(lam) - lam)

    ref = optimize.minimize(nll, np.r_[fit.mu, 0.0], method="BFGS", options={"gtol": 1e-8}).x
    np.testing.assert_allclose(np.r_[fit_c.mu, fit_c.gamma], ref, atol=1e-5)


def _l1_l2_corpus():
    """Fair-Speech-sized L1/L2 data (26,000 utterances, ~1.3e5 errors) on which an absolute IRLS
    deviance tolerance never stops: the saturated fit's deviance is float noise (~1e-11)."""
    rng = np.random.default_rng(1)
    n = 26000
    group = np.where(rng.random(n) < 0.8, "L1", "L2")
    words = rng.integers(1, 30, n)
    errors = rng.poisson(words * np.where(group == "L1", 0.3, 0.5))
    return errors, words, group


def test_large_l1_l2_glm_converges_on_the_closed_form():
    import statsmodels.api as sm

    errors, words, group = _l1_l2_corpus()
    tot = {g: (errors[group == g].sum(), words[group == g].sum()) for g in ("L1", "L2")}
    # the case is hard for an absolute criterion: statsmodels' default check (successive deviances
    # within tol = 1e-12) runs out of iterations on the collapsed two-row problem
    y = np.array([tot["L1"][0], tot["L2"][0]], float)
    w = np.array([tot["L1"][1], tot["L2"][1]], float)
    with pytest.warns(Warning):
        old = sm.GLM(y, np.eye(2), family=sm.families.Poisson(), offset=np.log(w)).fit(maxiter=100, tol=1e-12)
    assert not old.converged
    # cell means: mu_g = log(errors_g / words_g)
    fit = fit_poisson_glmm(errors, words, group)
    assert fit.converged, fit.message
    for g, mu in zip(fit.groups, fit.mu):
        assert mu == pytest.approx(math.log(tot[g][0] / tot[g][1]), rel=1e-12)
    # one binary covariate (x = 1 for L2) and an intercept: exp(beta) = ratio of the groups' rates
    x = (group == "L2").astype(float)
    fit_x = fit_poisson_glmm(errors, words, np.full(group.size, "all"), covariates=x[:, None])
    assert fit_x.converged, fit_x.message
    rate = {g: tot[g][0] / tot[g][1] for g in tot}
    assert math.exp(fit_x.gamma[0]) == pytest.approx(rate["L2"] / rate["L1"], rel=1e-10)
    assert math.exp(fit_x.mu[0]) == pytest.approx(rate["L1"], rel=1e-10)


def test_glm_not_at_optimum_is_not_converged(monkeypatch):
    """The score check rejects an IRLS stop away from the optimum (here: one iteration allowed)."""
    errors, words, group = _l1_l2_corpus()
    real_fit = poisson_glm.sm.GLM.fit

    def one_step(self, *a, **k):
        k["maxiter"] = 1
        return real_fit(self, *a, **k)

    monkeypatch.setattr(poisson_glm.sm.GLM, "fit", one_step)
    fit = fit_poisson_glmm(errors, words, group)
    assert not fit.converged and "IRLS" in fit.message


def test_sigma_zero_data_gives_small_sigma_and_glm_means():
    df = simulate_errors([0.1, 0.2], speakers_per_group=30, utts_per_speaker=(10, 20), sigma=1e-9, seed=8)
    fit = fit_poisson_glmm(df.errors, df.words, df.group, df.speaker)
    assert fit.converged and fit.sigma < 0.1
    glm = fit_poisson_glmm(df.errors, df.words, df.group)
    np.testing.assert_allclose(fit.mu, glm.mu, atol=0.02)


def test_bootstrap_weights_equal_explicit_duplicated_speakers():
    """A replicate fitted as a speaker-weighted likelihood equals the fit on a dataset in which each
    drawn speaker is copied under a new id (the cluster-bootstrap definition)."""
    df = simulate_errors([0.1, 0.2, 0.3], speakers_per_group=7, sigma=0.5, seed=6)
    fit = fit_poisson_glmm(df.errors, df.words, df.group, df.speaker)
    boot = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, fit=fit, n_resamples=3, seed=42)
    # redraw the same speakers: per replicate, within each group, as many draws as speakers, rng(seed)
    rng = np.random.default_rng(42)
    speakers = sorted(df.speaker.unique())
    spk_group = {s: df.loc[df.speaker == s, "group"].iloc[0] for s in speakers}
    group_codes = np.array([sorted(df.group.unique()).index(spk_group[s]) for s in speakers])
    counts = np.zeros((3, len(speakers)), dtype=int)
    for b in range(3):  # replicate by replicate, groups in sorted order
        for g in np.unique(group_codes):
            members = np.flatnonzero(group_codes == g)
            for d in rng.integers(0, members.size, size=members.size):
                counts[b, members[d]] += 1
    for b in range(3):
        parts = []
        for k, s in enumerate(speakers):
            for copy in range(counts[b, k]):
                part = df[df.speaker == s].copy()
                part["speaker"] = f"{s}#{copy}"
                parts.append(part)
        dup = pd.concat(parts)
        ref = fit_poisson_glmm(dup.errors, dup.words, dup.group, dup.speaker)
        np.testing.assert_allclose(boot.replicates[b], ref.mu, atol=1e-6)


def test_bootstrap_table_percentiles_and_significance():
    df = simulate_errors([0.05, 0.05, 0.25], speakers_per_group=15, sigma=0.3, seed=9)
    boot = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=200, seed=1)
    assert boot.n_resamples == 200 and boot.n_failed == 0 and boot.replicates.shape == (200, 3)
    t = boot.table.set_index(["group_a", "group_b"])
    assert list(t.index) == list(itertools.combinations(["g0", "g1", "g2"], 2))
    d = boot.replicates[:, 0] - boot.replicates[:, 2]
    lo, hi = np.exp(np.quantile(d, [0.025, 0.975]))
    assert t.loc[("g0", "g2"), "ci_low"] == pytest.approx(lo)
    assert t.loc[("g0", "g2"), "ci_high"] == pytest.approx(hi)
    assert bool(t.loc[("g0", "g2"), "significant"]) == (hi < 1 or lo > 1)
    assert bool(t.loc[("g0", "g2"), "significant"])  # a 5x WER gap with 15 speakers per group
    # reproducible from the seed, independent of n_jobs
    again = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=40, seed=1, n_jobs=2)
    np.testing.assert_allclose(again.replicates, boot.replicates[:40], atol=1e-8)


def test_utterance_bootstrap_is_narrower_than_speaker_bootstrap_on_clustered_data():
    df = simulate_errors([0.1, 0.1], speakers_per_group=12, utts_per_speaker=(20, 30), sigma=0.8, seed=12)
    spk = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=200, seed=0)
    utt = bootstrap_wer_ratios(df.errors, df.words, df.group, None, n_resamples=200, seed=0)
    assert "utterances" in utt.resampling and "speakers" in spk.resampling
    w_spk = math.log(spk.table.ci_high[0] / spk.table.ci_low[0])
    w_utt = math.log(utt.table.ci_high[0] / utt.table.ci_low[0])
    assert w_utt < 0.6 * w_spk


def test_bootstrap_counts_replicates_without_errors_as_failed():
    # group g1 has errors from one speaker only: resamples without that speaker cannot be fitted
    df = simulate_errors([0.2, 0.2], speakers_per_group=4, sigma=0.1, seed=1)
    df.loc[(df.group == "g1") & (df.speaker != "g1s000"), "errors"] = 0
    boot = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=200, seed=0)
    # P(speaker g1s000 not drawn in 4 draws) = (3/4)^4 ~ 0.32
    assert 30 < boot.n_failed < 100
    assert boot.failures == {"a group has zero errors in the resample": boot.n_failed}
    assert boot.replicates.shape[0] == 200 - boot.n_failed


@pytest.mark.parametrize(
    "mutate, match",
    [
        (
            lambda d: d.assign(errors=d.errors.where(d.index != 3, -1)),
            r"errors must be non-negative integers; .*row\(s\) \[3\]",
        ),
        (lambda d: d.assign(words=d.words.where(d.index != 5, 0)), r"words .* must be positive; .*row\(s\) \[5\]"),
        (lambda d: d.assign(errors=d.errors.where(d.group != "g1", 0)), r"group\(s\) \['g1'\] have zero errors"),
    ],
)
def test_bad_input_is_named(mutate, match):
    df = mutate(simulate_errors([0.1, 0.2], speakers_per_group=4, seed=0))
    with pytest.raises(ValueError, match=match):
        fit_poisson_glmm(df.errors, df.words, df.group, df.speaker)


def test_collinear_covariate_and_multi_group_speaker_rejected():
    df = simulate_errors([0.1, 0.2], speakers_per_group=4, seed=0)
    df["dup"] = (df.group == "g1").astype(float)
    with pytest.raises(ValueError, match=r"rank deficient.*\['dup'\]"):
        fit_poisson_glmm(df.errors, df.words, df.group, df.speaker, covariates=df[["dup"]])
    df.loc[df.index[0], "group"] = "g1"  # speaker g0s000 now has utterances in g0 and g1
    with pytest.raises(ValueError, match=r"speaker\(s\) \['g0s000'\] appear in more than one group"):
        bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=5)
