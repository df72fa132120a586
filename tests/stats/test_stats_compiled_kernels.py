"""The numba kernels against what they replace: numpy's own random words, integer division, and the
numpy kernels' results, bit for bit; the kernel choice from what a call knows."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from speechbias.stats import bootstrap_se, permutation_test
from speechbias.stats import compiled_kernels
from speechbias.stats.compiled_kernels import count_by_rejection, count_by_selection, division_magic, raw_words
from speechbias.stats.kernel_choice import ENVIRONMENT_VARIABLE, use_compiled_kernels
from speechbias.stats.permutation import (
    _count_by_rejection,
    _count_by_selection_sampling,
    _selection_chunk,
    _tie_tolerance,
    byte_sum_tables,
    complement_counts,
)
from speechbias.stats.random_integers import TableIntegers


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 12345])
def test_numbas_generator_draws_numpys_raw_words_and_continues_its_stream(seed):
    ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    numpys.random()  # a generator that has already drawn (and holds a buffered half-word: random_raw skips it)
    ours.random()
    numpys.integers(0, 7, size=3, dtype=np.uint32)
    ours.integers(0, 7, size=3, dtype=np.uint32)
    assert np.array_equal(raw_words(ours, 5_000), numpys.bit_generator.random_raw(5_000))
    assert np.array_equal(raw_words(ours, 1), numpys.bit_generator.random_raw(1))
    # numba steps the numpy generator's own state: numpy continues where the kernel stopped
    assert np.array_equal(ours.bit_generator.random_raw(100), numpys.bit_generator.random_raw(100))
    assert ours.random() == numpys.random()


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


@pytest.mark.parametrize("n, k", [(2000, 1000), (120, 20), (130, 3), (50, 7), (300, 150), (9, 4), (4096, 2048)])
def test_compiled_selection_count_equals_the_numpy_kernel(n, k):
    rng = np.random.default_rng(n + k)
    centred = rng.normal(size=n)
    centred -= centred.mean()
    n_permutations = 3_000 if n < 1000 else 600
    for t_obs in (float(centred[:k].sum()), 0.0, 0.4):
        numpy_count = _count_by_selection_sampling(centred, k, t_obs, n_permutations, np.random.default_rng(k))
        at_least = t_obs - _tie_tolerance(centred)
        compiled = count_by_selection(
            centred, k, at_least, n_permutations, _selection_chunk(n), np.random.default_rng(k)
        )
        assert compiled == numpy_count


def _compiled_rejection(centred, k, t_obs, n_permutations, rng):
    """compiled_kernels.count_by_rejection called as permutation._count_sampled_at_least calls it."""
    at_least = t_obs - _tie_tolerance(centred)
    n_subsets, n_complements = complement_counts(centred.size, k, n_permutations)
    tables = byte_sum_tables(centred)
    at_most = float(centred.sum()) - at_least
    steps = 30.0 + tables.shape[0]
    return count_by_rejection(centred, k, tables, at_least, at_most, n_subsets, n_complements, steps, rng)


@pytest.mark.parametrize("n, k", [(120, 60), (16, 8), (64, 32), (65, 32), (119, 60), (130, 65), (200, 100), (600, 300)])
def test_compiled_rejection_count_equals_the_numpy_kernel(n, k):
    # balanced groups (each subset counted with its complement) and near-balanced ones (each once); masks of
    # one word, a full word, a partial second word, three words and ten
    rng = np.random.default_rng(n + k)
    centred = rng.normal(size=n)
    centred -= centred.mean()
    for t_obs in (float(centred[:k].sum()), 0.0, -0.4):
        for n_permutations in (1, 2, 3, 2_001, 20_000):
            numpy_count = _count_by_rejection(centred, k, t_obs, n_permutations, np.random.default_rng(k))
            compiled = _compiled_rejection(centred, k, t_obs, n_permutations, np.random.default_rng(k))
            assert compiled == numpy_count, (t_obs, n_permutations)


def test_compiled_rejection_count_includes_tied_sums():
    values = np.repeat([-1.0, 1.0], [30, 30])  # every 30-subset's sum is an even integer: many exact ties
    for t_obs in (-4.0, 0.0, 4.0):
        count = _compiled_rejection(values, 30, t_obs, 5_000, np.random.default_rng(3))
        assert count == _count_by_rejection(values, 30, t_obs, 5_000, np.random.default_rng(3))
        assert 0 < count < 5_000


def test_a_rejection_count_split_over_several_compiled_calls_equals_one_call(monkeypatch):
    # calls of CALL_STEPS steps read one stream of words, as the numpy kernel's blocks do
    centred = np.random.default_rng(8).normal(size=120)
    centred -= centred.mean()
    t_obs = float(centred[:60].sum())
    numpy_count = _count_by_rejection(centred, 60, t_obs, 30_001, np.random.default_rng(4))
    for call_steps in (50, 4_321, 10**6):  # one subset per call, some hundreds, one call
        monkeypatch.setattr(compiled_kernels, "CALL_STEPS", call_steps)
        assert _compiled_rejection(centred, 60, t_obs, 30_001, np.random.default_rng(4)) == numpy_count


def test_compiled_selection_count_includes_tied_sums():
    values = np.repeat([-1.0, 1.0], [40, 10])  # every 10-subset's sum is an even integer: many exact ties
    at_least = -4.0 - _tie_tolerance(values)
    count = count_by_selection(values, 10, at_least, 5_000, _selection_chunk(50), np.random.default_rng(3))
    assert count == _count_by_selection_sampling(values, 10, -4.0, 5_000, np.random.default_rng(3))
    assert 0 < count < 5_000


def _both_paths(monkeypatch, fn):
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "numpy")
    numpy_result = fn()
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "compiled")
    return numpy_result, fn()


@pytest.mark.parametrize(
    "n_x, n_y, n_permutations", [(60, 60, 50_000), (20, 25, 50_000), (10, 70, 20_000), (1000, 1000, 2_000)]
)
def test_permutation_p_is_the_same_on_both_paths(monkeypatch, n_x, n_y, n_permutations):
    rng = np.random.default_rng(n_x + n_y)
    s_x, s_y = rng.normal(0.15, 1, n_x), rng.normal(0, 1, n_y)
    numpy_result, compiled_result = _both_paths(
        monkeypatch, lambda: permutation_test(s_x, s_y, n_permutations=n_permutations, seed=n_y)
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


@pytest.fixture
def fresh_choice(monkeypatch):
    """The kernel choice of a process that has not set the compiled kernels up: ``auto``, nothing forgone,
    the set-up recorded (``bought``) instead of run."""
    from speechbias.stats import kernel_choice

    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(kernel_choice, "_forgone", 0.0)
    monkeypatch.setattr(kernel_choice, "_numba_missing", None)
    monkeypatch.delitem(sys.modules, "speechbias.stats.compiled_kernels")
    monkeypatch.setattr(kernel_choice, "set_up_seconds", lambda: 1.0)
    bought = []
    monkeypatch.setattr(kernel_choice, "_set_up", lambda why: bought.append(why) or True)
    return bought


def test_kernel_choice_buys_for_a_call_that_repays_the_set_up_and_rents_otherwise(monkeypatch, fresh_choice):
    from speechbias.stats import kernel_choice

    # a call whose saving (numpy time minus compiled time) reaches the set-up cost buys at once
    assert use_compiled_kernels(2.0, speed_up=2.0) and len(fresh_choice) == 1
    fresh_choice.clear()
    # smaller calls: numpy, until the savings forgone reach the set-up cost (counting the current call)
    assert [use_compiled_kernels(0.5, speed_up=2.0) for _ in range(4)] == [False, False, False, True]
    assert len(fresh_choice) == 1 and kernel_choice._forgone == pytest.approx(1.0)


def test_kernel_choice_runs_compiled_once_the_kernels_are_set_up(monkeypatch, fresh_choice):
    monkeypatch.setitem(sys.modules, "speechbias.stats.compiled_kernels", object())
    assert use_compiled_kernels(1e-9, speed_up=1.01) and not fresh_choice  # nothing to buy: it is paid


def test_kernel_choice_follows_the_environment(monkeypatch, fresh_choice):
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "numpy")
    assert not use_compiled_kernels(1e6, speed_up=10.0)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "Compiled")
    assert use_compiled_kernels(0.0, speed_up=1.0)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "gpu")
    with pytest.raises(ValueError, match="SPEECHBIAS_STATS_KERNELS: must be one of"):
        use_compiled_kernels(1.0, speed_up=2.0)
    assert not fresh_choice


@pytest.mark.parametrize("n_x, n_y, asked", [(60, 60, True), (5, 5, False), (20, 100, True), (1000, 1000, True)])
def test_sampled_tests_ask_for_the_compiled_kernel_with_their_numpy_time(monkeypatch, n_x, n_y, asked):
    # exact tests are numpy only; both sampled kernels (rejection for 60 + 60, selection sampling for the
    # others) ask with their numpy time, proportional to the permutations
    from speechbias.stats import permutation

    calls = []
    monkeypatch.setattr(permutation, "use_compiled_kernels", lambda seconds, speed_up: calls.append(seconds) and False)
    rng = np.random.default_rng(4)
    for n_permutations in (1_000, 2_000):
        permutation_test(rng.normal(size=n_x), rng.normal(size=n_y), n_permutations=n_permutations, seed=1)
    assert bool(calls) == asked
    if asked:
        assert calls[1] == pytest.approx(2 * calls[0]) and calls[0] > 0


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


def test_many_tests_in_one_process_turn_compiled_with_the_same_numbers():
    # 30 SE curves in one process: none repays numba's set-up alone, together they do (rent-or-buy);
    # the numbers equal those of a process forced onto numpy
    code = (
        "import sys, numpy as np; from speechbias.stats import bootstrap_se; "
        "r = np.random.default_rng(0); x, y = r.normal(0.1, 1, 60), r.normal(size=60); "
        "se = [float(bootstrap_se(s_x=x, s_y=y, n_resamples=10_000, seed=s).se.sum()) for s in range(30)]; "
        "print('speechbias.stats.compiled_kernels' in sys.modules, repr(se))"
    )
    auto = _python(code).stdout.split(" ", 1)
    forced = _python("import os; os.environ['SPEECHBIAS_STATS_KERNELS'] = 'numpy'\n" + code).stdout.split(" ", 1)
    assert auto[0] == "True" and forced[0] == "False"
    assert auto[1] == forced[1]


def test_large_groups_run_compiled_from_their_first_test_with_the_same_p():
    # 1000 + 1000 targets: one test's saving repays the set-up at once
    code = (
        "import sys, numpy as np; from speechbias.stats import permutation_test; "
        "r = np.random.default_rng(0); x, y = r.normal(0.05, 1, 1000), r.normal(size=1000); "
        "p = permutation_test(x, y, n_permutations=100_000, seed=2).p; "
        "print('speechbias.stats.compiled_kernels' in sys.modules, repr(p))"
    )
    auto = _python(code).stdout.split()
    forced = _python("import os; os.environ['SPEECHBIAS_STATS_KERNELS'] = 'numpy'\n" + code).stdout.split()
    assert auto[0] == "True" and forced[0] == "False"
    assert auto[1] == forced[1]


def test_without_numba_large_statistics_warn_once_and_give_the_same_numbers(monkeypatch):
    out = _python(
        "import os, sys; sys.modules['numba'] = None\n"  # numba not importable
        "os.environ['SPEECHBIAS_STATS_KERNELS'] = 'auto'\n"
        "import speechbias.stats.kernel_choice as choice; choice.SET_UP_SECONDS_NUMBA_IMPORTED = 0.0\n"
        "import logging, numpy as np; logging.basicConfig(level=logging.WARNING, format='%(message)s')\n"
        "from speechbias.stats import permutation_test, bootstrap_se\n"
        "r = np.random.default_rng(0); x, y = r.normal(0.2, 1, 60), r.normal(size=60)\n"
        "p = permutation_test(x, y[:30], n_permutations=400_000, seed=3).p\n"
        "se = bootstrap_se(s_x=x, s_y=y, n_resamples=3_000, seed=3).se\n"
        "print(repr(p), repr(float(se.sum())))"
    )
    assert out.stderr.count("the compiled statistics kernels are unavailable (ModuleNotFoundError") == 1, out.stderr
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.2, 1, 60), rng.normal(size=60)
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "compiled")
    p = permutation_test(x, y[:30], n_permutations=400_000, seed=3).p
    se = bootstrap_se(s_x=x, s_y=y, n_resamples=3_000, seed=3).se
    assert out.stdout.split() == [repr(p), repr(float(se.sum()))]


def test_a_count_split_over_several_compiled_calls_equals_the_numpy_kernel():
    # a call returns to Python every CALL_STEPS steps (a stop signal is handled there): the split draws what
    # one loop draws
    from speechbias.stats.compiled_kernels import CALL_STEPS

    n, k = 2000, 300
    centred = np.random.default_rng(9).normal(size=n)
    centred -= centred.mean()
    chunk = _selection_chunk(n)
    n_permutations = 2 * (CALL_STEPS // (n * chunk)) * chunk + 3 * chunk + 5  # three calls, the last one partial
    t_obs = float(centred[:k].sum()) / 4
    numpy_count = _count_by_selection_sampling(centred, k, t_obs, n_permutations, np.random.default_rng(2))
    at_least = t_obs - _tie_tolerance(centred)
    assert count_by_selection(centred, k, at_least, n_permutations, chunk, np.random.default_rng(2)) == numpy_count


def test_a_bootstrap_split_over_several_compiled_calls_is_bit_identical(monkeypatch):
    # 2,000 + 2,000 targets, 3,000 resamples: the sizes' rows take more than one call of CALL_STEPS draws
    rng = np.random.default_rng(21)
    s_x, s_y = rng.normal(0.1, 1, 2000), rng.normal(0, 1, 2000)
    numpy_result, compiled_result = _both_paths(
        monkeypatch,
        lambda: bootstrap_se(s_x=s_x, s_y=s_y, sizes=[500, 1000, 1500, 2000], n_resamples=3_000, seed=6),
    )
    assert np.array_equal(compiled_result.se, numpy_result.se)
    assert (compiled_result.ci_low, compiled_result.ci_high) == (numpy_result.ci_low, numpy_result.ci_high)
