"""Sign congruence with the human IAT and between SpEAT d and downstream d, counted by loops."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.stats import HUMAN_IAT_D, StatsInputError, sign_agreement, sign_congruence


def test_human_iat_values_are_table_1_of_the_speat_paper():
    assert dict(HUMAN_IAT_D) == {
        "abled_disabled": 0.45,
        "european_african_american": 0.37,
        "female_male": 0.31,
        "human_synthesized": 0.33,
        "us_foreign": 0.32,
        "young_old": 0.49,
    }
    with pytest.raises(TypeError):
        HUMAN_IAT_D["female_male"] = 0.0


def random_effects(seed, n_models=16):
    rng = np.random.default_rng(seed)
    return {(f"model{m}", test): float(rng.normal(0.2, 0.6)) for m in range(n_models) for test in HUMAN_IAT_D}


def test_congruence_with_humans_counts_same_signs():
    effects = random_effects(0)
    expected = sum(1 for (_, test), d in effects.items() if (d > 0) == (HUMAN_IAT_D[test] > 0))
    result = sign_congruence(effects)
    assert (result.n_agree, result.n_total) == (expected, 96)
    assert result.fraction == pytest.approx(expected / 96)
    frame = pd.DataFrame([{"model": m, "test": t, "d": d} for (m, t), d in effects.items()])
    assert sign_congruence(frame).n_agree == expected
    assert set(result.table.columns) >= {"model", "test", "value", "reference", "agree"}


def test_custom_human_reference_with_a_negative_effect():
    effects = {("m1", "t1"): 0.4, ("m1", "t2"): 0.4, ("m2", "t2"): -0.1, ("m2", "t1"): 0.0}
    result = sign_congruence(effects, human={"t1": 0.2, "t2": -0.3})
    assert result.n_agree == 2  # (m1,t1) and (m2,t2); 0.0 agrees with nothing positive


def test_agreement_between_speat_and_downstream():
    speat_d = random_effects(1)
    downstream = {k: v * (-1 if i % 5 == 0 else 2.0) for i, (k, v) in enumerate(speat_d.items())}
    expected = sum(1 for k in speat_d if np.sign(speat_d[k]) == np.sign(downstream[k]))
    down_frame = pd.DataFrame([{"model": m, "test": t, "cohens_d": d} for (m, t), d in reversed(downstream.items())])
    result = sign_agreement(speat_d, down_frame)
    assert (result.n_agree, result.n_total) == (expected, 96)
    assert expected < 96  # the construction flips some signs


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sign_congruence({("m", "unknown_test"): 0.1}), r"no human IAT D for test\(s\) \['unknown_test'\]"),
        (lambda: sign_congruence({("m", "female_male"): float("nan")}), "effect_sizes: non-finite value"),
        (lambda: sign_congruence({"female_male": 0.1}), r"mapping keys must be \(model, test\) tuples"),
        (lambda: sign_congruence({}), "effect_sizes: is empty"),
        (
            lambda: sign_congruence(pd.DataFrame({"model": ["m", "m"], "test": ["female_male"] * 2, "d": [0.1, 0.2]})),
            r"duplicate \(model, test\)",
        ),
        (lambda: sign_congruence(pd.DataFrame({"model": ["m"], "d": [0.1]})), r"missing column\(s\) \['test'\]"),
        (lambda: sign_agreement({("m", "t"): 0.1}, {("m", "u"): 0.1}), r"only in speat_d: \[\('m', 't'\)\]"),
        (lambda: sign_congruence([0.1, 0.2]), "effect_sizes: expected a DataFrame"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(StatsInputError, match=match):
        call()
