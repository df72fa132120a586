"""Map a free-form answer to one of the options A, B, C, or to "other", recording the rule that decided.

This is our rule cascade, not the paper's procedure (the paper used an LLM judge; its authors' scorer
checks whether the answer is inside an option, then takes the lowest CER). It is built for how
instruction-tuned models answer, and never guesses: a rule decides only when it points at exactly
one option; when it points at several, the answer goes on to the next rule, and ends as "other" if
no rule is decisive. First decisive rule wins:

Letter rules (``method`` = ``letter``). Letters count in any case when bracketed (``(b)``, ``[B]``);
a bare capital only when punctuation, the end, or a verb such as ``is`` follows it (so ``A man ...``
is not option A); a bare lower-case letter only when punctuation or the end follows it (so ``it's a
good idea`` is not option A; after ``is`` never). Letters of all four rules are pooled first, with
bracketed letters anywhere and letters joined by or/and: two different letters (``A or B``,
``(A) or (B)``) decide nothing, except that a letter stated by rule 1 or 2 stands beside letters that
are only mentioned (``Between A and C, I would pick C.``).

1. ``letter_only``: the whole answer is a letter, optionally introduced: ``B``, ``(c)``, ``**B.**``,
   ``Answer: (b)``, ``Option C``.
2. ``letter_stated``: a phrase states it: ``the answer is C``, ``I think option (c)``, ``The best
   continuation is A.``, ``Option B is the most likely.``, ``I'd say B.``, ``I'll go with c.``.
3. ``letter_first``: the answer starts with a letter: ``A. ...``, ``(B) ...``, ``c) ...``,
   ``B is the most likely continuation.``.
4. ``letter_last``: the answer ends with a sentence that is only a letter: ``... Therefore, B.``.

Before the letter rules, an echo of the option list (``A. <text of A>`` for two or more options) is
removed, so ``A. ... B. ... C. ... Answer: B`` is B and the bare echo is other.

Text rules (``method`` = ``text``; texts normalised: NFKC, lowercase, punctuation removed,
whitespace collapsed; matches on whole words):

5. ``option_text``: exactly one option's whole text occurs in the answer (an option found only as
   part of another found option's text does not count).
6. ``answer_in_option``: the answer, minus a lead-in such as ``the most likely continuation is``, is
   at least two words and part of exactly one option's text (``rebuilt the engine``).
7. ``quoted_part``: every quoted span of two or more words (``"..."``, ``“...”``) is part of the
   same single option's text.

8. ``cer`` (``method`` = ``cer``): the option with the lowest character error rate (jiwer.cer,
   option = reference, answer = hypothesis) if it is at most ``cer_threshold`` (0.1), untied, and the
   answer does not contradict it (as in rule 9: "I baked a pie" is 0.1 from "I baked a cake").
9. ``most_words`` (``method`` = ``text``): at least ``min_word_recall`` (80%) of one option's words
   occur in order in the answer (ROUGE-L recall, rouge_score), and of no other option, and the answer
   does not contradict that option (:func:`contradiction`): no option word is *replaced* by other words
   ("I rebuilt the engine of my car" does not restate "... of my truck"; "... for my kids" may be a
   paraphrase, but a rule cannot tell, so it goes to the judge), and no negation the option lacks
   stands among the option's words ("I have not rebuilt the engine of my truck"). Words may only be
   added around the option's or left out.
10. ``judge`` (optional): an :class:`AnswerJudge` (e.g. a local chat model,
    :class:`~speechbias.sllm.adapters.judge.ChatJudge`) decides what the rules left undecided.

Otherwise ``none``: the answer maps to "other". Every mapping records its method, rule and a reason.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import jiwer
from rouge_score import rouge_scorer, tokenizers

DEFAULT_CER_THRESHOLD = 0.1
DEFAULT_MIN_WORD_RECALL = 0.8
#: rule -> method (coarse kind), in cascade order
RULES = {
    "letter_only": "letter",
    "letter_stated": "letter",
    "letter_first": "letter",
    "letter_last": "letter",
    "option_text": "text",
    "answer_in_option": "text",
    "quoted_part": "text",
    "cer": "cer",
    "most_words": "text",
    "judge": "judge",
    "none": "none",
}
METHODS = tuple(dict.fromkeys(RULES.values()))
LETTER_RULES = ("letter_only", "letter_stated", "letter_first", "letter_last")

# lead-ins removed before checking whether the answer is part of an option (normalised text)
_LEAD_IN = re.compile(
    r"^(?:(?:i think|i believe|i would say|id say|probably|maybe|so|well|"
    r"the (?:most likely |best |correct )?(?:continuation|answer|option|sentence)(?: to the audio clip)?"
    r"(?: is| would be| will be)?|the speaker (?:would|will) (?:most likely )?(?:say|continue with)|"
    r"answer|it is|its)\s+)+"
)
_ADVERB = r"(?:\s+(?:most\s+likely|likely|probably|clearly|definitely|certainly))?"
_VERB_AFTER = r"(?:is|seems|would|sounds|fits|makes|follows|best|because|as|since)"


@dataclass(frozen=True)
class AnswerMapping:
    """``letter``: the chosen option (None = other); ``method``: one of :data:`METHODS`; ``rule``: the
    rule that decided (a key of :data:`RULES`); ``detail``: why."""

    letter: str | None
    method: str
    detail: str
    rule: str = "none"


@runtime_checkable
class AnswerJudge(Protocol):
    """Decides an answer the rules could not: returns an option letter or None."""

    def judge(self, response: str, options: Mapping[str, str]) -> str | None: ...


def normalise(text: str) -> str:
    """NFKC, lowercase, punctuation removed (not replaced: ``don't`` -> ``dont``), whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = re.sub(r"[^\w\s]", "", text)
    return " ".join(text.split())


def _strip_decoration(text: str) -> str:
    text = unicodedata.normalize("NFKC", str(text)).strip()
    text = re.sub(r"[*_`#]+", "", text)  # markdown emphasis / code / headers
    return text.strip().strip("\"'“”‘’").strip()


def _token(letters: str) -> str:
    """A letter mention, case-sensitive even inside an IGNORECASE pattern: bracketed (any case), a bare
    capital, or a bare lower-case letter (three groups, checked by :func:`_accept`)."""
    both = letters + letters.lower()
    return rf"(?-i:[(\[]([{both}])[)\]]|([{letters}])(?![\w'’])|([{letters.lower()}])(?![\w'’]))"


def _accept(
    bracketed: str | None, capital: str | None, lower: str | None, rest: str, capital_follow: str | None
) -> str | None:
    """The letter of a :func:`_token` match if what follows it (``rest``) allows it; ``capital_follow``
    None: a bare lower-case letter never counts (after ``is``, ``a`` is the article)."""
    if bracketed:
        return bracketed.upper()
    if capital:
        return capital if re.match(capital_follow or r"\s*(?:[.,;:!?)\]\-–]|$)", rest) else None
    if lower and capital_follow is not None:
        return lower.upper() if re.match(r"\s*(?:[.,;:!?)\]]|$)", rest) else None
    return None


def _patterns(letters: str) -> dict[str, list[tuple[re.Pattern, str | None]]]:
    """rule -> [(pattern whose last groups are a :func:`_token`, what must follow a bare capital; None =
    punctuation or the end, and no bare lower-case letter)]."""
    tok = _token(letters)
    punct_or_end = r"\s*(?:[.,;:!?)\]\-–]|$)"
    loose = rf"(?:{punct_or_end}|\s+{_VERB_AFTER}\b)"
    anything = r"(?![\w'’])(?!\s*,?\s*(?:or|and|nor)\b)"  # "answer is A or B" states nothing
    intro = r"(?:(?:the\s+)?(?:answer|option|choice|letter|sentence)\s*(?:is)?\s*[:\-–]?\s*)?"
    flags = re.IGNORECASE
    return {
        "letter_only": [(re.compile(rf"^{intro}{tok}\s*[.!:)]?$", flags), anything)],
        "letter_stated": [
            (
                re.compile(
                    rf"\b(?:answer|option|choice|letter|continuation|sentence)"
                    rf"(?:\s+(?:is|would\s+be|will\s+be|should\s+be|must\s+be)){_ADVERB}\s*[:\-–]?\s*{tok}",
                    flags,
                ),
                anything,
            ),
            (re.compile(rf"\b(?:option|choice|letter|answer)\s*[:\-–]?\s*{tok}", flags), anything),
            (
                re.compile(
                    rf"\b(?:choose|chose|choosing|pick|picked|select|selected|go\s+with|going\s+with|say|"
                    rf"guess|prefer|opt\s+for)\s+(?:option\s+|letter\s+|answer\s+)?{tok}",
                    flags,
                ),
                loose,
            ),
            (re.compile(rf"\b(?:is|be|it's|it’s){_ADVERB}\s+{tok}", flags), None),
        ],
        "letter_first": [(re.compile(rf"^{tok}"), loose)],
        "letter_last": [
            (
                re.compile(
                    rf"(?:^|[.!?:;,\n]\s*|\b(?:so|therefore|thus|hence)\s+)(?:option\s+)?{tok}"
                    r"\s*[.!]?\s*$",
                    flags,
                ),
                anything,
            )
        ],
    }


def remove_option_echo(response: str, options: Mapping[str, str]) -> str:
    """The answer without an echoed option list (``A. <text of A>`` for two or more options)."""
    text = str(response)
    spans = []
    for letter, option in options.items():
        body = re.escape(str(option).strip().rstrip(".!?"))
        pattern = rf"[(\[]?{letter}[)\].:]\s*[\"“]?{body}[.!?]?[\"”]?"
        spans += [(m.start(), m.end(), letter) for m in re.finditer(pattern, text, re.IGNORECASE)]
    if len({letter for _, _, letter in spans}) < 2:
        return text
    for start, end, _ in sorted(spans, reverse=True):
        text = text[:start] + " " + text[end:]
    return text


def letters_by_rule(response: str, letters: str = "ABC") -> dict[str, list[str]]:
    """rule -> distinct option letters it finds in the answer (rules 1-4), in order of mention."""
    text = _strip_decoration(response)
    found: dict[str, list[str]] = {}
    for rule, patterns in _patterns(letters).items():
        hits: list[str] = []
        for pattern, capital_follow in patterns:
            g = pattern.groups  # the token is the pattern's last three groups
            for m in pattern.finditer(text):
                idx = next(i for i in (g - 2, g - 1, g) if m.group(i) is not None)
                letter = _accept(m.group(g - 2), m.group(g - 1), m.group(g), text[m.end(idx) :], capital_follow)
                if letter and letter in letters and letter not in hits:
                    hits.append(letter)
        if hits:
            found[rule] = hits
    return found


def mentioned_letters(response: str, letters: str = "ABC") -> set[str]:
    """Letters mentioned without being chosen: bracketed anywhere (``(A) or (B)``) and capitals joined
    by or/and/versus (``A or B``, ``between A and C``). Used only to see that an answer names several."""
    text = _strip_decoration(response)
    both = letters + letters.lower()
    found = {m.group(1).upper() for m in re.finditer(rf"[(\[]([{both}])[)\]]", text)}
    joined = rf"(?<![\w'’])([{letters}])(?![\w'’])"
    found |= {m.group(1) for m in re.finditer(rf"{joined}(?=\s*,?\s+(?:or|and|nor|vs\.?|versus)\b)", text)}
    found |= {m.group(1) for m in re.finditer(rf"\b(?:or|and|nor|vs\.?|versus|between)\s+{joined}", text)}
    return found


def find_letters(response: str, letters: str = "ABC") -> list[str]:
    """Distinct option letters the answer names by any letter rule, in rule order then order of mention."""
    out: list[str] = []
    for hits in letters_by_rule(response, letters).values():
        out += [h for h in hits if h not in out]
    return out


def _part_of(needle: str, haystack: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def find_quoted_options(response: str, options: Mapping[str, str]) -> list[str]:
    """Letters whose normalised text occurs (as whole words) in the normalised answer, minus options
    found only as part of another found option's text."""
    resp = normalise(response)
    found = {letter: normalise(text) for letter, text in options.items() if _part_of(normalise(text), resp)}
    return [
        letter
        for letter, text in found.items()
        if not any(other != letter and text != t and _part_of(text, t) for other, t in found.items())
    ]


def options_containing(fragment: str, options: Mapping[str, str], min_words: int = 2) -> list[str]:
    """Letters of the options whose normalised text contains the normalised ``fragment`` as whole words
    (none when the fragment has fewer than ``min_words`` words)."""
    frag = normalise(fragment)
    if len(frag.split()) < min_words:
        return []
    return [letter for letter, text in options.items() if _part_of(frag, normalise(text))]


def quoted_spans(response: str) -> list[str]:
    """Texts between double quotes (straight or curly) in the answer."""
    return [m.group(1) or m.group(2) for m in re.finditer(r"\"([^\"]+)\"|“([^”]+)”", str(response))]


def closest_by_cer(response: str, options: Mapping[str, str]) -> tuple[str | None, float, bool]:
    """(letter of lowest CER, that CER, whether another option ties it); letter None for an empty answer."""
    hyp = normalise(response)
    if not hyp:
        return None, float("inf"), False
    cers = {letter: float(jiwer.cer(normalise(text), hyp)) for letter, text in options.items() if normalise(text)}
    if not cers:
        return None, float("inf"), False
    best = min(cers, key=cers.get)
    tie = sum(abs(c - cers[best]) < 1e-12 for c in cers.values()) > 1
    return best, cers[best], tie


# the default tokenizer given explicitly: the same scorer, without rouge_score's absl INFO line ("Using default
# tokenizer.") on every run's console
_SCORER = rouge_scorer.RougeScorer(["rougeL"], tokenizer=tokenizers.DefaultTokenizer(use_stemmer=False))
# words that negate what follows them (normalised: "don't" -> "dont")
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "nor",
        "neither",
        "cannot",
        "cant",
        "dont",
        "didnt",
        "doesnt",
        "isnt",
        "wasnt",
        "werent",
        "arent",
        "wont",
        "wouldnt",
        "couldnt",
        "shouldnt",
        "hasnt",
        "havent",
        "hadnt",
        "nobody",
        "nothing",
    }
)


# a replaced span within this character error rate of the option's words is a spelling variant ("cak" for
# "cake", "can not" for "cannot", "child" for "children"), not another word
SPELLING_VARIANT_CER = 0.5


def _aligned_words(option: list[str], answer: list[str]) -> list[tuple[int, int]]:
    """(option position, answer position) of a longest common subsequence of the two word lists.
    Written here because rouge_score gives the LCS length only, not which words it aligns."""
    n, m = len(option), len(answer)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if option[i] == answer[j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if option[i] == answer[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def contradiction(response: str, option: str) -> str | None:
    """Why ``response`` contradicts ``option`` although it shares most or nearly all of its characters,
    or None: an option word replaced by other words (a gap in the word alignment after its first
    aligned word that both texts fill, the option's end included, unless the replacement is a spelling
    variant: CER <= :data:`SPELLING_VARIANT_CER`), or a negation the option lacks among the aligned
    words (normalised texts)."""
    opt, ans = normalise(option).split(), normalise(response).split()
    pairs = _aligned_words(opt, ans)
    if not pairs:
        return None
    # gaps after the first aligned word (before it, a lead-in such as "she said she" is not a replacement)
    bounds = [*pairs, (len(opt), len(ans))]
    for (i0, j0), (i1, j1) in zip(bounds, bounds[1:]):
        missing, instead = " ".join(opt[i0 + 1 : i1]), " ".join(ans[j0 + 1 : j1])
        if missing and instead and float(jiwer.cer(missing, instead)) > SPELLING_VARIANT_CER:
            return f"replaces {missing!r} with {instead!r}"
    first, last = pairs[0][1], pairs[-1][1]
    added = [w for w in ans[first : last + 1] if w in NEGATIONS]
    if len(added) > sum(w in NEGATIONS for w in opt):  # "can not" restates "cannot"; "have not" negates
        return f"negates it ({', '.join(dict.fromkeys(added))})"
    return None


def word_recall(response: str, options: Mapping[str, str]) -> dict[str, float]:
    """letter -> share of the option's words that occur in order in the answer (ROUGE-L recall)."""
    return {
        letter: float(_SCORER.score(target=str(text), prediction=str(response))["rougeL"].recall)
        for letter, text in options.items()
    }


def _decide(letter: str, rule: str, detail: str) -> AnswerMapping:
    return AnswerMapping(letter, RULES[rule], detail, rule)


def map_answer(
    response: str,
    options: Mapping[str, str],
    cer_threshold: float = DEFAULT_CER_THRESHOLD,
    judge: AnswerJudge | None = None,
    min_word_recall: float = DEFAULT_MIN_WORD_RECALL,
) -> AnswerMapping:
    """Map ``response`` to a letter of ``options`` (letter -> continuation text) or to other."""
    if not 0.0 <= float(cer_threshold) <= 1.0:
        raise ValueError(f"cer_threshold must be in [0, 1], got {cer_threshold}")
    if not 0.0 < float(min_word_recall) <= 1.0:
        raise ValueError(f"min_word_recall must be in (0, 1], got {min_word_recall}")
    if not options:
        raise ValueError("options must name at least one option")
    text = remove_option_echo(response, options)
    notes = [] if text == str(response) else ["option list echo removed"]
    by_rule = letters_by_rule(text, "".join(options))
    named = find_letters(text, "".join(options))
    mentioned = mentioned_letters(text, "".join(options)) - set(named)
    rule = next((r for r in LETTER_RULES if r in by_rule), None)
    # a stated choice stands beside mere mentions ("between A and C, I pick C"); a leading or final
    # letter does not ("(A) or (B)")
    if len(named) == 1 and (not mentioned or rule in ("letter_only", "letter_stated")):
        return _decide(
            named[0],
            rule,
            f"names option {named[0]}" + (f" (also mentions {','.join(sorted(mentioned))})" if mentioned else ""),
        )
    if len(named) + len(mentioned) > 1:
        notes.append(f"names several letters {','.join(named + sorted(mentioned))}")

    quoted = find_quoted_options(text, options)
    if len(quoted) == 1:
        return _decide(quoted[0], "option_text", f"contains the text of option {quoted[0]}")
    if quoted:
        notes.append(f"contains the texts of options {','.join(quoted)}")
    else:
        inside = options_containing(_LEAD_IN.sub("", normalise(text)), options)
        if len(inside) == 1:
            return _decide(inside[0], "answer_in_option", f"the answer is part of option {inside[0]}")
        if inside:
            notes.append(f"the answer is part of options {','.join(inside)}")
        spans = [options_containing(span, options) for span in quoted_spans(text)]
        spans = [s for s in spans if s]
        pointed = {letter for s in spans for letter in s}
        if len(pointed) == 1:
            letter = pointed.pop()
            return _decide(letter, "quoted_part", f"quotes part of option {letter}")
        if pointed:
            notes.append(f"quotes parts of options {','.join(sorted(pointed))}")
        best, cer, tie = closest_by_cer(text, options)
        against = contradiction(text, options[best]) if best is not None and not tie and cer <= cer_threshold else None
        if best is not None and not tie and cer <= cer_threshold and against is None:
            return _decide(best, "cer", f"CER {cer:.3f} to option {best}")
        if against is not None:
            notes.append(f"CER {cer:.3f} to option {best} but {against}")
        if best is not None:
            notes.append(f"lowest CER {cer:.3f} (option {best}{', tied' if tie else ''})")
        else:
            notes.append("empty answer")
        recall = word_recall(text, options) if best is not None else {}
        over = [letter for letter, r in recall.items() if r >= min_word_recall]
        if len(over) == 1:
            against = contradiction(text, options[over[0]])
            if against is None:
                return _decide(over[0], "most_words", f"{recall[over[0]]:.0%} of the words of option {over[0]}")
            notes.append(f"most words of option {over[0]} but {against}")
        elif over:
            notes.append(f"most words of options {','.join(over)}")
    if judge is not None:
        verdict = judge.judge(str(response), options)
        if verdict is not None:
            verdict = str(verdict).strip().upper()
            if verdict not in options:
                raise ValueError(f"judge returned {verdict!r}, expected one of {list(options)} or None")
            return _decide(verdict, "judge", f"judge chose {verdict}; " + "; ".join(notes))
        notes.append("judge undecided")
    return AnswerMapping(None, "none", "; ".join(notes) or "no rule applies", "none")
