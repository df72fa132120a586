"""Map a free-form answer to one of the options A, B, C, or to "other".

Steps, first decisive one wins (the paper's procedure):

1. ``letter``: the answer names exactly one option letter: the whole answer is a letter
   (``B``, ``(b)``, ``**C.**``), it starts with a lettered option (``A. ...``, ``(B) ...``, ``C)``),
   or says so (``Answer: B``, ``the answer is (C)``, ``I choose A.``). A capital letter counts only
   when punctuation or the end of a line follows it, so ``A man ...`` is not option A. If the answer
   quotes the texts of two or more options (an echo of the question, a comparison), letters are not
   trusted and the answer goes on to step 2 (where several quoted options make it ambiguous).
2. ``substring``: exactly one option's text occurs in the answer (both normalised: NFKC, lowercase,
   punctuation removed, whitespace collapsed; whole words). An option found only because it is part
   of another found option's text does not count.
3. ``cer``: the option with the lowest character error rate (jiwer.cer, option = reference, answer =
   hypothesis, normalised) if that CER is at most ``cer_threshold`` (0.1) and no other option ties it.
4. ``judge`` (optional): an :class:`AnswerJudge` decides answers the rules left undecided.

Otherwise ``none``: the answer maps to "other". Every mapping records its method and a reason.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import jiwer

DEFAULT_CER_THRESHOLD = 0.1
METHODS = ("letter", "substring", "cer", "judge", "none")


@dataclass(frozen=True)
class AnswerMapping:
    """``letter``: the chosen option (None = other); ``method``: one of :data:`METHODS`; ``detail``: why."""

    letter: str | None
    method: str
    detail: str


@runtime_checkable
class AnswerJudge(Protocol):
    """Decides an answer the rules could not: returns an option letter or None."""

    def judge(self, response: str, options: Mapping[str, str]) -> str | None:
        ...


def normalise(text: str) -> str:
    """NFKC, lowercase, punctuation removed (not replaced: ``don't`` -> ``dont``), whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = re.sub(r"[^\w\s]", "", text)
    return " ".join(text.split())


def _letter_patterns(letters: str) -> list[re.Pattern]:
    cls = f"[{letters}]"
    after = r"(?=\s*(?:[.,;:!?)\]]|$))"  # punctuation or end of line after a bare capital letter
    return [
        re.compile(rf"^\(?({cls})\)?[.:)]?$", re.IGNORECASE),                          # whole answer
        re.compile(rf"^\(({cls})\)"),                                                    # "(B) ..."
        re.compile(rf"^({cls})\s*[.:)\]]"),                                              # "A. ...", "C) ..."
        re.compile(rf"\(({cls})\)"),                                                     # "... (C) ..."
        re.compile(rf"\b(?:answer|option|choice)\s*(?:is|would be|will be)?\s*[:\-]?\s*({cls}){after}",
                   re.IGNORECASE | re.MULTILINE),                                        # "Answer: B"
        re.compile(rf"\b(?:choose|chose|pick|select|go with|it is|it's)\s+(?:option\s+)?({cls}){after}",
                   re.IGNORECASE | re.MULTILINE),                                        # "I choose A."
    ]


def _strip_decoration(text: str) -> str:
    text = unicodedata.normalize("NFKC", str(text)).strip()
    text = re.sub(r"[*_`#]+", "", text)  # markdown emphasis / code / headers
    return text.strip().strip("\"'“”‘’").strip()


def find_letters(response: str, letters: str = "ABC") -> list[str]:
    """Distinct option letters the answer names (see step 1), in order of first mention."""
    text = _strip_decoration(response)
    found: list[str] = []
    for pattern in _letter_patterns(letters):
        for m in pattern.finditer(text):
            letter = m.group(1).upper()
            # whole-answer pattern may match lower case; others require the capital as written
            if letter in letters and letter not in found:
                found.append(letter)
    return found


def find_quoted_options(response: str, options: Mapping[str, str]) -> list[str]:
    """Letters whose normalised text occurs (as whole words) in the normalised answer, minus options
    found only as part of another found option's text."""
    resp = f" {normalise(response)} "
    found = {letter: normalise(text) for letter, text in options.items()
             if normalise(text) and f" {normalise(text)} " in resp}
    return [letter for letter, text in found.items()
            if not any(other != letter and text != t and f" {text} " in f" {t} " for other, t in found.items())]


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


def map_answer(response: str, options: Mapping[str, str], cer_threshold: float = DEFAULT_CER_THRESHOLD,
               judge: AnswerJudge | None = None) -> AnswerMapping:
    """Map ``response`` to a letter of ``options`` (letter -> continuation text) or to other."""
    if not 0.0 <= float(cer_threshold) <= 1.0:
        raise ValueError(f"cer_threshold must be in [0, 1], got {cer_threshold}")
    if not options:
        raise ValueError("options must name at least one option")
    letters = "".join(options)
    quoted = find_quoted_options(response, options)
    named = find_letters(response, letters)
    notes = []
    if len(named) == 1 and len(quoted) <= 1:
        return AnswerMapping(named[0], "letter", f"names option {named[0]}")
    if len(named) > 1:
        notes.append(f"names several letters {','.join(named)}")
    elif named:
        notes.append(f"names {named[0]} but quotes options {','.join(quoted)}")
    if len(quoted) == 1:
        return AnswerMapping(quoted[0], "substring", f"contains the text of option {quoted[0]}")
    if len(quoted) > 1:
        notes.append(f"contains the texts of options {','.join(quoted)}")
    else:
        best, cer, tie = closest_by_cer(response, options)
        if best is not None and not tie and cer <= cer_threshold:
            return AnswerMapping(best, "cer", f"CER {cer:.3f} to option {best}")
        if best is not None:
            notes.append(f"lowest CER {cer:.3f} (option {best}{', tied' if tie else ''})")
        else:
            notes.append("empty answer")
    if judge is not None:
        verdict = judge.judge(response, options)
        if verdict is not None:
            verdict = str(verdict).strip().upper()
            if verdict not in options:
                raise ValueError(f"judge returned {verdict!r}, expected one of {list(options)} or None")
            return AnswerMapping(verdict, "judge", f"judge chose {verdict}; " + "; ".join(notes))
        notes.append("judge undecided")
    return AnswerMapping(None, "none", "; ".join(notes))
