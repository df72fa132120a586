"""Typed settings whose values are checked where they are declared: one dataclass per settings group.

A settings group subclasses :class:`Settings` as a (frozen) dataclass; its ``NODE`` is the config node it
reads (``speat``, ``task.glmm``; "" for top-level keys such as ``lr``) and each field, declared with
:func:`setting`, is one key of that node with what it accepts (an :class:`Accepts`: kind, range, choices).
``__post_init__`` converts each value as the command line gives it (``"5"`` or ``1e6`` -> 5, ``[1e-3]`` -> a
tuple) and raises :class:`~speechbias.errors.ConfigError` in one line naming the key, the value and what is
accepted. The config checks build each group with ``from_config`` before any model, extraction or corpus
read; the entry point builds a task's groups the same way (``from_config`` of each of the task's
``TASK_SETTINGS``), so the task gets the checked objects. Standard library and OmegaConf only: ground floor,
no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, ClassVar

from speechbias.errors import ConfigError

# metadata keys of a dataclass field declared with setting()
ACCEPTS = "speechbias.accepts"

KINDS = ("int", "float", "bool", "choice", "text", "floats", "texts", "mapping", "device")
# the device types a model's ``device`` setting takes (torch.device's, with an index: cuda:1; auto: cuda when
# one is visible, else cpu)
DEVICE_TYPES = ("auto", "cpu", "cuda", "mps")


@dataclass(frozen=True)
class Accepts:
    """What a setting accepts. ``kind``: int | float | bool | choice | text (a string) | floats (a number or a
    list of them) | texts (a list of strings) | mapping (strings to strings). ``low``/``high``: bounds of a
    number (``*_open``: the bound itself excluded); ``choices``: the allowed strings (of a choice, or of each
    item of texts); ``optional``: null accepted; ``nonempty``: an empty string or list refused; ``words``: strings
    a number setting also takes as themselves (``auto``). ``device``: one of :data:`DEVICE_TYPES`, an index
    after any but auto (``cuda:1``)."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    optional: bool = False
    nonempty: bool = False
    distinct: bool = False
    words: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    def describe(self) -> str:
        """What is accepted, in words (the end of an error line)."""
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {_bound(self.low)}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {_bound(self.high)}")
        ranged = f" {' and '.join(bounds)}" if bounds else ""
        words = "".join(f" or {word}" for word in self.words)
        # a long list of names is cut short, as the option check cuts a group's (a near miss gets did-you-mean)
        many = len(self.choices) > 12
        names = f"{len(self.choices)} names: {', '.join(self.choices[:6])}, ..." if many else ", ".join(self.choices)
        text = {
            "int": f"an integer{ranged}",
            "float": f"a number{ranged}{words}",
            "bool": "true or false",
            "choice": f"one of {names}",
            "text": "a non-empty string" if self.nonempty else "a string",
            "floats": f"a number{ranged} or a list of {'distinct ' if self.distinct else ''}such numbers",
            "texts": (
                f"a list of {names}" if self.choices else f"a {'non-empty ' if self.nonempty else ''}list of strings"
            ),
            "mapping": "a mapping of names to strings",
            "device": "auto, cpu, cuda, cuda:<index> or mps",
        }[self.kind]
        return f"{text} (or null)" if self.optional else text

    def convert(self, value: Any) -> Any:
        """``value`` as this setting holds it; :class:`ValueError` when it is not accepted."""
        if value is None:
            if self.optional:
                return None
            raise ValueError
        if isinstance(value, str) and value in self.words:
            return value
        if self.kind == "int":
            return self._in_range(_integer(value))
        if self.kind == "float":
            return self._in_range(_number(value))
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError
        if self.kind == "choice":
            if isinstance(value, str) and value in self.choices:
                return value
            raise ValueError
        if self.kind == "text":
            text = _text(value)
            if self.nonempty and not text.strip():
                raise ValueError
            return text
        if self.kind == "floats":
            items = [value] if isinstance(value, (str, int, float, bool)) else _sequence(value)
            numbers = tuple(self._in_range(_number(v)) for v in items)
            if not numbers or (self.distinct and len(set(numbers)) != len(numbers)):
                raise ValueError
            return numbers
        if self.kind == "texts":
            texts = tuple(_text(v) for v in _sequence(value))
            if (self.nonempty and not texts) or (self.choices and any(t not in self.choices for t in texts)):
                raise ValueError
            return texts
        if self.kind == "device":
            kind, colon, index = _text(value).partition(":")
            if kind in DEVICE_TYPES and (not colon or (kind != "auto" and index.isdigit())):
                return f"{kind}{colon}{index}"
            raise ValueError
        if not isinstance(value, Mapping):  # mapping
            raise ValueError
        return {_text(k): _text(v) for k, v in value.items()}

    def _in_range(self, number):
        low, high = self.low, self.high
        if low is not None and (number < low or (self.low_open and number == low)):
            raise ValueError
        if high is not None and (number > high or (self.high_open and number == high)):
            raise ValueError
        return number


def _bound(value: float) -> str:
    """A bound as written: 1, 0.5, 1e-05, 4294967295."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _sequence(value) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValueError
    return list(value)


def _integer(value) -> int:
    """An int, an integral float (``1e6``) or a string of one; never a bool."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    number = _number(value)
    if not number.is_integer():
        raise ValueError
    return int(number)


def _number(value) -> float:
    """A finite int or float, or a string of one (``"1e-4"``); never a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError
    number = float(value)  # ValueError for "abc"
    if not math.isfinite(number):
        raise ValueError
    return number


def _text(value) -> str:
    """A string (numbers given on the command line, such as ``2024``, count as their text); no bool, list,
    mapping or null."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError
    return str(value)


def integer(low=None, optional=False) -> Accepts:
    return Accepts("int", low=low, optional=optional)


def number(low=None, high=None, low_open=False, high_open=False, optional=False, words=()) -> Accepts:
    """A number in the range; ``words``: strings also taken as themselves (``number(0, words=("auto",))``)."""
    return Accepts(
        "float", low=low, high=high, low_open=low_open, high_open=high_open, optional=optional, words=tuple(words)
    )


def device(optional=False) -> Accepts:
    return Accepts("device", choices=DEVICE_TYPES, optional=optional)


def boolean() -> Accepts:
    return Accepts("bool")


def choice(*choices: str, optional=False) -> Accepts:
    return Accepts("choice", choices=tuple(choices), optional=optional)


def text(optional=False, nonempty=True) -> Accepts:
    return Accepts("text", optional=optional, nonempty=nonempty)


def texts(*choices: str, optional=False, nonempty=False) -> Accepts:
    return Accepts("texts", choices=tuple(choices), optional=optional, nonempty=nonempty)


# a seed of numpy's and torch's generators
SEED = Accepts("int", low=0, high=2**32 - 1)


def setting(accepts: Accepts, default: Any = dataclasses.MISSING, doc: str = "") -> Any:
    """A dataclass field accepting ``accepts`` (``default``: its value when not given; a list or mapping
    default is copied as a tuple / dict). ``doc`` says what it sets (shown in the error line). The field's
    user key is the class's ``NODE`` and the field's name (``speat`` + ``n_permutations``)."""
    metadata = {ACCEPTS: accepts, "doc": doc}
    if isinstance(default, (list, dict)):
        frozen = tuple(default) if isinstance(default, list) else dict(default)
        return field(default_factory=lambda: frozen, metadata=metadata)
    return field(default=default, metadata=metadata)


class Settings:
    """Base of a settings group: a dataclass whose :func:`setting` fields are the keys of the config node
    ``NODE`` (dotted; "" for top-level keys)."""

    NODE: ClassVar[str] = ""

    def __post_init__(self):
        """Convert and check every :func:`setting` field in place (frozen ones too); the first value not
        accepted raises :class:`ConfigError`: ``<key>=<value>: must be <what is accepted> (<what it sets>)[; did
        you mean <choice>?]`` (difflib's close matches of a string not among a setting's choices)."""
        for f in setting_fields(self):
            value = _plain(getattr(self, f.name))
            accepts = f.metadata[ACCEPTS]
            try:
                converted = accepts.convert(value)
            except (ValueError, TypeError, OverflowError):
                doc = f" ({f.metadata['doc']})" if f.metadata["doc"] else ""
                typed = [v for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, str)]
                close = [c for v in typed if v not in accepts.choices for c in get_close_matches(v, accepts.choices, 2)]
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                raise ConfigError(
                    f"{self.key_of(f.name)}={shown(value)}: must be {accepts.describe()}{doc}{hint}"
                ) from None
            object.__setattr__(self, f.name, converted)

    @classmethod
    def key_of(cls, name: str) -> str:
        """The user key of field ``name``."""
        return f"{cls.NODE}.{name}" if cls.NODE else name

    @classmethod
    def from_config(cls, cfg):
        """Built from the whole run config (a DictConfig): the values of its fields found under ``NODE``,
        resolved (absent: the default). A reference that does not resolve is one line naming its key."""
        from omegaconf import DictConfig, OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        node_key = cls.NODE
        try:
            node = OmegaConf.select(cfg, node_key, default=None) if node_key else cfg
        except OmegaConfBaseException:
            node = None  # named below, by the first key that does not resolve
        if node is not None and not isinstance(node, DictConfig):  # propagation.aggregation=nope
            raise ConfigError(
                f"{node_key}={shown(_plain(node))}: must be a config node, not a value; set its keys one by one, "
                f"e.g. {node_key}.{setting_fields(cls)[0].name}=..."
            )
        values = {}
        for f in setting_fields(cls):
            try:
                value = OmegaConf.select(cfg, cls.key_of(f.name), default=_ABSENT, throw_on_missing=True)
            except OmegaConfBaseException as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ConfigError(f"{cls.key_of(f.name)}: cannot be resolved ({reason})") from None
            if value is not _ABSENT:
                values[f.name] = _plain(value)
        return cls(**values)


_ABSENT = object()


def setting_fields(cls_or_obj) -> list[dataclasses.Field]:
    """The fields of a settings class declared with :func:`setting`."""
    return [f for f in dataclasses.fields(cls_or_obj) if ACCEPTS in f.metadata]


def settings_keys(cls) -> dict[str, Accepts]:
    """User key -> what it accepts, for every :func:`setting` field of ``cls``."""
    return {cls.key_of(f.name): f.metadata[ACCEPTS] for f in setting_fields(cls)}


def shown(value) -> str:
    """A value as the user typed it (lists and mappings in brackets, null for None), on one line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(shown(v) for v in value) + "]"
    return " ".join(str(value).split())


def _plain(value):
    """OmegaConf containers as plain lists and dicts (a settings object holds no config node)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value
