from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from speechbias.sllm.prompts import ALL_ORDERS, PromptTemplate, build_requests, option_orders

TEMPLATE = PromptTemplate(audio="Pick one.\n{options}\nLetter only.", text_only='They said "{transcript}".\n{options}')


def _table(n=1):
    return pd.DataFrame(
        {
            "domain": "gender",
            "id": range(n),
            "speaker": "Aria",
            "group": "female",
            "context": "ctx",
            "stereotypical": "S text",
            "anti-stereotypical": "A text",
            "irrelevant": "I text",
            "audio_path": [f"/x/{i}.wav" for i in range(n)],
        }
    )


def test_options_follow_the_order_and_answer_key():
    reqs = build_requests(_table(50), TEMPLATE, orders="shuffled", seed=1)
    assert len(reqs) == 50
    for r in reqs:
        for letter, kind in r.answer_key.items():
            assert (
                r.options[letter]
                == {"stereotypical": "S text", "anti-stereotypical": "A text", "irrelevant": "I text"}[kind]
            )
            assert f"{letter}. {r.options[letter]}" in r.prompt
        assert r.audio_path is not None and "ctx" not in r.prompt


def test_shuffled_is_seeded_per_instance_and_covers_orders():
    a = [option_orders("shuffled", 0, "gender", i, "Aria")[0] for i in range(600)]
    b = [option_orders("shuffled", 0, "gender", i, "Aria")[0] for i in range(600)]
    c = [option_orders("shuffled", 1, "gender", i, "Aria")[0] for i in range(600)]
    assert a == b and a != c
    counts = Counter(a)
    assert set(counts) == set(ALL_ORDERS)
    assert all(60 <= n <= 140 for n in counts.values()), counts  # 100 expected each
    # same instance, same order in any subset
    sub = build_requests(_table(10).iloc[5:], TEMPLATE, seed=0)
    full = build_requests(_table(10), TEMPLATE, seed=0)
    assert [r.order for r in sub] == [r.order for r in full[5:]]


def test_all_orders_and_text_only():
    reqs = build_requests(_table(2), TEMPLATE, orders="all", text_only=True)
    assert len(reqs) == 12 and len({r.key for r in reqs}) == 12
    assert {r.order for r in reqs[:6]} == set(ALL_ORDERS)
    assert all(r.audio_path is None and 'They said "ctx"' in r.prompt for r in reqs)
    # each kind sits under each letter equally often
    assert Counter((r.order.index("stereotypical")) for r in reqs) == {0: 4, 1: 4, 2: 4}


def test_template_validation():
    with pytest.raises(ValueError, match="audio"):
        PromptTemplate(audio="no options here", text_only="{options}{transcript}")
    with pytest.raises(ValueError, match="text_only"):
        PromptTemplate(audio="{options}", text_only="{options}")
    with pytest.raises(ValueError, match="order mode"):
        option_orders("fixed", 0, "gender", 1, "a")
