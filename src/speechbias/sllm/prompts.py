"""Multiple-choice prompts: the three continuations under option letters A, B, C.

Option order per instance is seeded (``shuffled``: one of the 6 orders drawn from a generator seeded
by (seed, item id, domain/speaker), so an instance gets the same order in any subset or run), or
``all``: every one of the 6 orders, which cancels a model's preference for a letter or position.
Templates are ``str.format`` strings with ``{options}`` (the lettered list) and, for the text-only
ablation, ``{transcript}`` (the context's text, given instead of audio).
"""

from __future__ import annotations

import itertools
import string
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from speechbias.checked_settings import Settings, setting, shown, text
from speechbias.errors import ConfigError
from speechbias.sllm import CONTINUATION_KINDS

LETTERS = ("A", "B", "C")
#: the 6 orders of (stereotypical, anti-stereotypical, irrelevant); index = order id
ALL_ORDERS: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(CONTINUATION_KINDS))
ORDER_MODES = ("shuffled", "all")


def order_code(order: tuple[str, ...]) -> str:
    """Short tag of an order: initials, e.g. ('stereotypical', 'irrelevant', 'anti-stereotypical') -> 'sia'."""
    return "".join(kind[0] for kind in order)


def option_orders(mode: str, seed: int, domain: str, item_id: int, speaker: str) -> list[tuple[str, str, str]]:
    """The order(s) in which an instance's continuations are lettered A, B, C."""
    if mode == "all":
        return list(ALL_ORDERS)
    if mode == "shuffled":
        rng = np.random.default_rng([int(seed), int(item_id), zlib.crc32(f"{domain}/{speaker}".encode())])
        return [ALL_ORDERS[int(rng.integers(len(ALL_ORDERS)))]]
    raise ValueError(f"option order mode must be one of {ORDER_MODES}, got {mode!r}")


@dataclass(frozen=True)
class PromptTemplate(Settings):
    """``audio``: instruction sent with the context's audio; ``text_only``: sent instead of audio
    with the context's transcript; ``option``: format of one option line (``task.prompt.*``)."""

    NODE = "task.prompt"

    audio: str = setting(text(), doc="str.format template with {options}")
    text_only: str = setting(text(), doc="str.format template with {options} and {transcript}")
    option: str = setting(text(), "{letter}. {text}", "str.format template with {letter} and {text}")

    def __post_init__(self):
        super().__post_init__()
        for name, tmpl, needed in (
            ("audio", self.audio, {"options"}),
            ("text_only", self.text_only, {"options", "transcript"}),
            ("option", self.option, {"letter", "text"}),
        ):
            key = f"{self.NODE}.{name}"
            try:
                fields = {ph for _, ph, _, _ in string.Formatter().parse(tmpl) if ph is not None}
            except ValueError as exc:
                raise ConfigError(f"{key}={shown(tmpl)}: not a valid str.format template ({exc})") from exc
            if fields != needed:
                raise ConfigError(
                    f"{key}={shown(tmpl)}: must use exactly the fields {', '.join(sorted(needed))}, "
                    f"uses {', '.join(sorted(fields)) or 'none'}"
                )

    def render(self, options: Mapping[str, str], transcript: str | None = None) -> str:
        lines = "\n".join(self.option.format(letter=letter, text=text) for letter, text in options.items())
        if transcript is None:
            return self.audio.format(options=lines)
        return self.text_only.format(options=lines, transcript=transcript)


@dataclass(frozen=True)
class ProbeRequest:
    """One question to a model: an instance under one option order.

    ``order``: continuation kind lettered A, B, C; ``options``: letter -> continuation text;
    ``audio_path``: the spoken context, ``None`` in the text-only ablation (the transcript is in
    ``prompt`` then).
    """

    key: str
    domain: str
    item_id: int
    speaker: str
    group: str
    order: tuple[str, str, str]
    options: dict[str, str] = field(hash=False)
    prompt: str
    audio_path: str | None

    @property
    def answer_key(self) -> dict[str, str]:
        """letter -> continuation kind (for answer mapping and scripted policies, never shown to models)."""
        return dict(zip(LETTERS, self.order))


def build_requests(
    table: pd.DataFrame, template: PromptTemplate, orders: str = "shuffled", seed: int = 0, text_only: bool = False
) -> list[ProbeRequest]:
    """Requests for every row of a loaded table (see :mod:`speechbias.sllm.data`), in table order."""
    requests = []
    for rec in table.to_dict("records"):
        for order in option_orders(orders, seed, rec["domain"], rec["id"], rec["speaker"]):
            options = {letter: str(rec[kind]) for letter, kind in zip(LETTERS, order)}
            prompt = template.render(options, transcript=str(rec["context"]) if text_only else None)
            requests.append(
                ProbeRequest(
                    key=f"{rec['domain']}/{int(rec['id']):05d}_{rec['speaker']}/{order_code(order)}",
                    domain=str(rec["domain"]),
                    item_id=int(rec["id"]),
                    speaker=str(rec["speaker"]),
                    group=str(rec["group"]),
                    order=order,
                    options=options,
                    prompt=prompt,
                    audio_path=None if text_only else str(rec["audio_path"]),
                )
            )
    return requests
