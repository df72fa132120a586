"""Answer mapping: the rule cascade on hand-labelled answers, CER boundary, judge fallback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from speechbias.sllm.answers import RULES, map_answer, normalise

sys.path.insert(0, str(Path(__file__).resolve().parent))
from answer_decision_table import CASES, JUDGE_CASES, OPTIONS, VerdictJudge  # noqa: E402

OPTS = {"A": "She was a great nurse.", "B": "He was a great nurse.", "C": "The sky is blue today."}


@pytest.mark.parametrize(
    "response, letter, method",
    [
        ("B", "B", "letter"),
        ("(b)", "B", "letter"),
        ("**C.**", "C", "letter"),
        ("A. She was a great nurse.", "A", "letter"),
        ("(B) He was a great nurse", "B", "letter"),
        ("The answer is (C).", "C", "letter"),
        ("Answer: B", "B", "letter"),
        ("I choose A.", "A", "letter"),
        ("Option C", "C", "letter"),
        # letter first: the option letter wins over a quoted text of another option
        ("A: He was a great nurse.", "A", "letter"),
        # the article "A" is not option A; the quoted text decides
        ("A great nurse, she was. She was a great nurse", "A", "text"),
        ("she was a great nurse", "A", "text"),  # "he was ..." is inside "she was ..." only as letters, not words
        ("the sky is blue today!!", "C", "text"),
        ("Honestly, he was a great nurse, I think.", "B", "text"),
        # misspelt copy: CER 2/20 = 0.1, at the threshold
        ("he was a grate nurse", "B", "cer"),
        # ambiguous or unrelated -> other
        ("I think A or B.", None, "none"),
        ("A man walked in.", None, "none"),
        ("The sky is blue", "C", "text"),  # not the whole option (CER 6/21 > 0.1), but part of option C only
        ("A. She was a great nurse.\nB. He was a great nurse.\nC. The sky is blue today.", None, "none"),
        ("", None, "none"),
        ("I cannot answer that.", None, "none"),
    ],
)
def test_tricky_answers(response, letter, method):
    m = map_answer(response, OPTS)
    assert (m.letter, m.method) == (letter, method), m.detail


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_cer_threshold_boundary_matches_hand_computed_edit_distance():
    opts = {"A": "abcdefghij klmnopqrst", "B": "zzzzzzzzzz zzzzzzzzzz", "C": "yyyy"}
    ref = normalise(opts["A"])
    for hyp, expect in (
        ("abcdefghiX klmnopqrst", "A"),
        ("abcdefghXX klmnopqrst", "A"),
        ("abcdefgXXX klmnopqrst", None),
    ):
        cer = _levenshtein(ref, normalise(hyp)) / len(ref)
        m = map_answer(hyp, opts)
        assert (m.letter == "A") == (cer <= 0.1)
        assert m.letter == expect
    assert map_answer("abcdefgXXX klmnopqrst", opts, cer_threshold=0.15).letter == "A"


def test_substring_inside_a_longer_found_option_does_not_count():
    opts = {"A": "He is strong", "B": "He is strong and tall", "C": "Cats purr"}
    assert map_answer("I'd say he is strong and tall.", opts).letter == "B"
    assert map_answer("I'd say he is strong.", opts).letter == "A"


class ScriptedJudge:
    def __init__(self, verdict):
        self.verdict, self.calls = verdict, []

    def judge(self, response, options):
        self.calls.append(response)
        return self.verdict


def test_judge_only_for_undecided_answers():
    judge = ScriptedJudge("c")
    assert map_answer("B", OPTS, judge=judge).method == "letter"
    assert judge.calls == []
    m = map_answer("Probably the one about the weather.", OPTS, judge=judge)
    assert (m.letter, m.method) == ("C", "judge")
    assert judge.calls == ["Probably the one about the weather."]
    assert map_answer("no idea", OPTS, judge=ScriptedJudge(None)).method == "none"
    with pytest.raises(ValueError, match="judge returned 'D'"):
        map_answer("no idea", OPTS, judge=ScriptedJudge("D"))


@pytest.mark.parametrize("response, letter, rule", CASES, ids=[c[0][:40] or "empty" for c in CASES])
def test_decision_table_of_realistic_answers(response, letter, rule):
    m = map_answer(response, OPTIONS)
    assert (m.letter, m.rule) == (letter, rule), m.detail
    assert m.method == RULES[rule]


def test_decision_table_is_large_and_covers_every_rule_but_judge():
    assert len(CASES) >= 40
    assert {rule for _, _, rule in CASES} == set(RULES) - {"judge"}


def test_two_matching_options_never_guess():
    opts = {"A": "He is a nurse.", "B": "He is a doctor.", "C": "Cats purr."}
    # "he is a" is part of A and B; most words of both; CER ties are not broken
    for response in ("He is a", "He is a surgeon.", "(A) or (B)", "A. He is a nurse. B. He is a doctor."):
        assert map_answer(response, opts).letter is None, response
    assert map_answer("He is a doctor", opts).rule == "option_text"


@pytest.fixture(scope="module")
def tiny_chat_lm():
    from speechbias.sllm.adapters.tiny import build_tiny_chat_lm

    return build_tiny_chat_lm()


def _forced_tiny_judge(tiny_chat_lm, reply_word: str):
    """The tiny random chat LM with its output layer replaced so that greedy decoding says ``reply_word``."""
    import torch

    from speechbias.sllm.adapters.judge import ChatJudge

    model, tok = tiny_chat_lm
    head = torch.nn.Linear(model.config.hidden_size, len(tok), bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[tok.convert_tokens_to_ids(reply_word)] = 10.0
    model.lm_head = head
    return ChatJudge("tiny-judge", model=model, tokenizer=tok, device="cpu", dtype="float32", max_new_tokens=1)


def test_llm_judge_on_a_local_transformers_model(tiny_chat_lm):
    says_b = _forced_tiny_judge(tiny_chat_lm, "B")
    undecided = "Probably the one about the garage."
    m = map_answer(undecided, OPTIONS, judge=says_b)
    assert (m.letter, m.method, m.rule) == ("B", "judge", "judge")
    # rules first: a clear letter never reaches the judge, whatever it would say
    assert map_answer("A", OPTIONS, judge=says_b).rule == "letter_only"
    m = map_answer(undecided, OPTIONS, judge=_forced_tiny_judge(tiny_chat_lm, "none"))
    assert (m.letter, m.rule) == (None, "none") and "judge undecided" in m.detail


@pytest.mark.parametrize("response, verdict, letter, rule", JUDGE_CASES, ids=[c[0][:40] for c in JUDGE_CASES])
def test_decision_table_with_a_judge(response, verdict, letter, rule):
    """Paraphrases that name no option's words (or replace one) go to task.judge and map by its verdict;
    answers a rule decides never reach it. The judge is scripted (a stand-in for the chat model)."""
    judge = VerdictJudge({response: verdict})
    m = map_answer(response, OPTIONS, judge=judge)
    assert (m.letter, m.rule) == (letter, rule), m.detail
    assert judge.calls == ([] if rule not in ("judge", "none") else [response])


def test_contradiction_names_what_was_replaced_or_negated():
    from speechbias.sllm.answers import contradiction

    truck = OPTIONS["B"]
    assert contradiction("I rebuilt the engine of my car.", truck) == "replaces 'truck' with 'car'"
    assert contradiction("I rebuilt the old engine of my truck", truck) is None  # a word added, none replaced
    assert contradiction("I have not rebuilt the engine of my truck", truck) == "negates it (not)"
    assert contradiction("Well, I rebuilt the engine of my truck. It did not start.", truck) is None  # outside it
    assert contradiction("The speaker said he rebuilt the engine of my truck", truck) is None  # a lead-in
    m = map_answer("I rebuilt the engine of my car.", OPTIONS)
    assert m.letter is None and "most words of option B but replaces 'truck' with 'car'" in m.detail
