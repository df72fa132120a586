"""The numba kernels against what they replace: numpy's own PCG64 words, integer division, and the
numpy kernels' results, bit for bit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from speechbias.stats import bootstrap_se, permutation_test
from speechbias.stats.compiled_kernels import count_by_rejection, division_magic
from speechbias.stats.compiled_pcg64 import raw_words, read_state, write_state
from speechbias.stats.kernel_choice import BREAK_EVEN_DRAWS, ENVIRONMENT_VARIABLE, plan_draws, use_compiled_kernels
from speechbias.stats.permutation import _count_by_rejection, _tie_tolerance, byte_sum_tables
from speechbias.stats.random_integers import TableIntegers


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 12345])
def test_compiled_pcg64_words_are_numpys_random_raw(seed):
    ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    numpys.bit_generator.random_raw(7)  # a generator that has already drawn
    ours.bit_generator.random_raw(7)
    state = read_state(ours)
    assert np.array_equal(raw_words(state, 5_000), numpys.bit_generator.random_raw(5_000))
    assert np.array_equal(raw_words(state, 3_001, True), numpys.bit_generator.random_raw(3_001))  # two at a time
    write_state(ours, state)  # handing the state back continues numpy's stream
    assert np.array_equal(ours.bit_generator.random_raw(100), numpys.bit_generator.random_raw(100))
    assert ours.random() == numpys.random()


def test_compiled_pcg64_refuses_other_bit_generators():
    with pytest.raises(TypeError, match="PCG64 only, got 'SFC64'"):
        read_state(np.random.Generator(np.random.SFC64(0)))


def test_division_magic_equals_integer_division_for_every_16_bit_value():
    values = np.arange(1 << 16, dtype=np.uint64)
    # every divisor TableIntegers uses (65536 // high for high in 1..65536) and the extremes
    divisors = sorted({(1 << 16) // high for high in range(1, (1 << 16) + 1)} | {2, 3, 7, 255, 256, 257, 65535})
    for divisor in divisors:
        quotient = (values * division_magic(divisor)) >> np.uint64(48)
        assert np.array_equal(quotient, values // np.uint64(divisor)), divisor
    for high in (1, 2, 3, 60, 3600, 4096, 65535):
        drawer = TableIntegers(high)
        mapped = (values[: drawer.limit] * division_magic(drawer.repeats)) >> np.uint64(48)
        assert np.array_equal(mapped, drawer.table[: drawer.limit])
    with pytest.raises(ValueError, match="divisor"):
        division_magic((1 << 16) + 1)


@pytest.mark.parametrize("n, k", [(120, 60), (130, 65), (64, 32), (128, 64), (16, 8), (9, 4), (100, 50)])
def test_compiled_rejection_count_equals_the_numpy_kernel(n, k):
    rng = np.random.default_rng(n)
    centred = rng.normal(size=n)
    centred -= centred.mean()
    for t_obs in (float(centred[:k].sum()), 0.0, 0.4):
        numpy_count = _count_by_rejection(centred, k, t_obs, 20_000, np.random.default_rng(k))
        at_least = t_obs - _tie_tolerance(centred)
        compiled = count_by_rejection(centred, k, byte_sum_tables(centred), at_least, 20_000, np.random.default_rng(k))
        assert compiled == numpy_count


def test_compiled_rejection_count_includes_tied_sums():
    values = np.repeat([-1.0, 1.0], 30)  # every 30-subset's sum is a multiple of 2: many exact ties
    at_least = 0.0 - _tie_tolerance(values)
    count = count_by_rejection(values, 30, byte_sum_tables(values), at_least, 5_000, np.random.default_rng(3))
    assert count == _count_by_rejection(values, 30, 0.0, 5_000, np.random.default_rng(3))
    assert 0 < count < 5_000


def _both_paths(monkeypatch, fn):
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "numpy")
    numpy_result = fn()
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "compiled")
    return numpy_result, fn()


@pytest.mark.parametrize("n_x, n_y, seed", [(60, 60, 0), (33, 33, 1), (20, 25, 2)])
def test_permutation_p_is_the_same_on_both_paths(monkeypatch, n_x, n_y, seed):
    rng = np.random.default_rng(seed)
    s_x, s_y = rng.normal(0.15, 1, n_x), rng.normal(0, 1, n_y)
    numpy_result, compiled_result = _both_paths(
        monkeypatch, lambda: permutation_test(s_x, s_y, n_permutations=50_000, seed=seed)
    )
    assert compiled_result == numpy_result


@pytest.mark.parametrize(
    "m_x, m_y, sizes",
    [
        (60, 60, None),  # pair tables, even and odd sizes
        (40, 70, [2, 3, 17, 40]),  # Y has 70 items: no pair table (single draws only)
        (5, 9, [2, 3, 4, 5]),  # tiny groups
    ],
)
def test_iid_bootstrap_is_bit_identical_on_both_paths(monkeypatch, m_x, m_y, sizes):
    rng = np.random.default_rng(m_x + m_y)
    s_x, s_y = rng.normal(0.3, 1, m_x), rng.normal(0, 1, m_y)
    numpy_result, compiled_result = _both_paths(
        monkeypatch, lambda: bootstrap_se(s_x=s_x, s_y=s_y, sizes=sizes, n_resamples=3_000, seed=11)
    )
    for field in ("se", "n_valid", "sizes"):
        assert np.array_equal(getattr(compiled_result, field), getattr(numpy_result, field)), field
    assert (compiled_result.ci_low, compiled_result.ci_high) == (numpy_result.ci_low, numpy_result.ci_high)


def test_paired_bootstrap_is_bit_identical_on_both_paths(monkeypatch):
    rng = np.random.default_rng(5)
    s_x, s_y = rng.normal(0.2, 1, 31), rng.normal(0, 1, 31)
    ids = [f"p{i}" for i in range(31)]
    numpy_result, compiled_result = _both_paths(
        monkeypatch,
        lambda: bootstrap_se(
            s_x=s_x, s_y=s_y, design="paired", pair_ids_x=ids, pair_ids_y=ids[::-1], n_resamples=2_000, seed=4
        ),
    )
    assert np.array_equal(compiled_result.se, numpy_result.se)
    assert (compiled_result.ci_low, compiled_result.ci_high) == (numpy_result.ci_low, numpy_result.ci_high)


def test_kernel_choice_follows_the_environment_and_the_work_done_so_far(monkeypatch):
    from speechbias.stats import kernel_choice

    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(kernel_choice, "_numpy_draws", 0)
    quarter = BREAK_EVEN_DRAWS // 4
    # rent: numpy until the process's draws reach the break-even point, counting the current call
    assert [use_compiled_kernels(quarter) for _ in range(4)] == [False, False, False, True]
    assert use_compiled_kernels(1)  # then buy: compiled from then on
    monkeypatch.setattr(kernel_choice, "_numpy_draws", 0)
    assert use_compiled_kernels(BREAK_EVEN_DRAWS)  # one call that large buys at once
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "numpy")
    assert not use_compiled_kernels(10**12)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "Compiled")
    assert use_compiled_kernels(1)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "gpu")
    with pytest.raises(ValueError, match="SPEECHBIAS_STATS_KERNELS: must be one of"):
        use_compiled_kernels(1)


def test_a_declared_workload_past_the_break_even_buys_the_compiled_kernels_at_once(monkeypatch):
    from speechbias.stats import kernel_choice

    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(kernel_choice, "_numpy_draws", 0)
    bought = []
    monkeypatch.setattr(kernel_choice, "_buy", lambda why: bought.append(why) or True)  # no numba set-up here
    small = BREAK_EVEN_DRAWS // 4
    assert not plan_draws(small)  # a small plan changes nothing: rent, as before
    assert not use_compiled_kernels(small) and not bought
    assert not plan_draws(BREAK_EVEN_DRAWS - 2 * small)  # with the draws already run: still short
    assert plan_draws(BREAK_EVEN_DRAWS - small) and len(bought) == 1  # the draws run count: buy now
    monkeypatch.setattr(kernel_choice, "_numpy_draws", BREAK_EVEN_DRAWS)  # as _buy leaves it
    assert use_compiled_kernels(1)  # the first call after the plan runs compiled
    monkeypatch.setattr(kernel_choice, "_numpy_draws", 0)
    bought.clear()
    assert plan_draws(96 * 72_000_000) and bought  # the paper workload's share of one process: at once
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "numpy")
    assert not plan_draws(10**12)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "compiled")
    assert plan_draws(0)


@pytest.mark.parametrize(
    "n_x, n_y, n_permutations", [(60, 60, 100_000), (13, 17, 20_000), (5, 5, 10_000), (10, 70, 5_000)]
)
def test_permutation_draws_are_what_the_test_counts(monkeypatch, n_x, n_y, n_permutations):
    from speechbias.stats import permutation
    from speechbias.stats.permutation import permutation_draws

    counted = []
    monkeypatch.setattr(permutation, "use_compiled_kernels", lambda n: counted.append(n) and False)
    rng = np.random.default_rng(4)
    permutation_test(rng.normal(size=n_x), rng.normal(size=n_y), n_permutations=n_permutations, seed=1)
    assert sum(counted) == permutation_draws(n_x, n_y, n_permutations)
    assert (permutation_draws(n_x, n_y, n_permutations) > 0) == bool(counted)  # exact, selection: numpy only


@pytest.mark.parametrize(
    "design, n_x, n_y, sizes",
    [("iid", 60, 60, None), ("iid", 9, 14, [2, 5, 9]), ("paired", 12, 12, None), ("stratified", 12, 12, None)],
)
def test_resample_draws_are_what_the_curve_counts(monkeypatch, design, n_x, n_y, sizes):
    from speechbias.stats import bootstrap
    from speechbias.stats.bootstrap import resample_draws

    counted = []
    monkeypatch.setattr(bootstrap, "use_compiled_kernels", lambda n: counted.append(n) and False)
    rng = np.random.default_rng(5)
    ids = {
        "paired": {"pair_ids_x": np.arange(n_x), "pair_ids_y": np.arange(n_y)[::-1]},
        "stratified": {"strata_x": np.arange(n_x) % 3, "strata_y": np.arange(n_y) % 2},
    }.get(design, {})
    bootstrap_se(
        s_x=rng.normal(size=n_x), s_y=rng.normal(size=n_y), design=design, sizes=sizes, n_resamples=200, seed=2, **ids
    )
    assert sum(counted) == resample_draws(n_x, n_y, 200, sizes=sizes, design=design)


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter that finds speechbias as this one does."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)


def test_one_paper_sized_test_does_not_import_numba():
    # one evaluate.py run: the 10^6-permutation test of 60 + 60, its SE curve, 25 per-layer tests
    out = _python(
        "import sys, numpy as np; from speechbias.stats import permutation_test, bootstrap_se; "
        "r = np.random.default_rng(0); x, y = r.normal(size=60), r.normal(size=60); "
        "permutation_test(x, y, n_permutations=1_000_000); bootstrap_se(s_x=x, s_y=y, n_resamples=10_000); "
        "[permutation_test(x, y, n_permutations=10_000) for _ in range(25)]; "
        "print('numba' in sys.modules)"
    )
    assert out.stdout.strip() == "False"


def test_a_declared_many_test_workload_runs_compiled_from_its_first_test_with_the_same_numbers(monkeypatch):
    # a process that declares 100 tests (as a sweep's job declares its process's share) runs compiled from
    # the first; a process that declares one keeps numpy and never imports numba; the numbers are the same
    code = (
        "import sys, numpy as np; from speechbias.stats import permutation_test, bootstrap_se; "
        "from speechbias.stats.kernel_choice import plan_draws; "
        "from speechbias.stats.permutation import permutation_draws; "
        "from speechbias.stats.bootstrap import resample_draws; "
        "r = np.random.default_rng(0); x, y = r.normal(0.1, 1, 60), r.normal(size=60); "
        "one = permutation_draws(60, 60, 200_000) + resample_draws(60, 60, 2_000); "
        "print(plan_draws({tests} * one)); "
        "p = permutation_test(x, y, n_permutations=200_000, seed=7).p; "
        "se = bootstrap_se(s_x=x, s_y=y, n_resamples=2_000, seed=7).se; "
        "print('numba' in sys.modules, repr(p), repr(float(se.sum())))"
    )
    planned = _python(code.format(tests=100)).stdout.split()
    single = _python(code.format(tests=1)).stdout.split()
    assert planned[:2] == ["True", "True"] and single[:2] == ["False", "False"]
    assert planned[2:] == single[2:]


def test_without_numba_large_statistics_warn_once_and_give_the_same_numbers(monkeypatch):
    out = _python(
        "import os, sys; sys.modules['numba'] = None\n"  # numba not importable
        "os.environ['SPEECHBIAS_STATS_KERNELS'] = 'auto'\n"
        "import speechbias.stats.kernel_choice as choice; choice.BREAK_EVEN_DRAWS = 1\n"
        "import logging, numpy as np; logging.basicConfig(level=logging.WARNING, format='%(message)s')\n"
        "from speechbias.stats import permutation_test, bootstrap_se\n"
        "r = np.random.default_rng(0); x, y = r.normal(0.2, 1, 60), r.normal(size=60)\n"
        "p = permutation_test(x, y, n_permutations=400_000, seed=3).p\n"
        "se = bootstrap_se(s_x=x, s_y=y, n_resamples=3_000, seed=3).se\n"
        "print(repr(p), repr(float(se.sum())))"
    )
    assert out.stderr.count("the compiled statistics kernels are unavailable (ModuleNotFoundError") == 1, out.stderr
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.2, 1, 60), rng.normal(size=60)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "compiled")
    p = permutation_test(x, y, n_permutations=400_000, seed=3).p
    se = bootstrap_se(s_x=x, s_y=y, n_resamples=3_000, seed=3).se
    assert out.stdout.split() == [repr(p), repr(float(se.sum()))]
