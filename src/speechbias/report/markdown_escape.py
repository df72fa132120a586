"""Text read from run folders (names, overrides, errors) made inert in a markdown report.

A sweep's run folders are untrusted input (``task=report`` reads whatever is there): a name holding
``<script>``, ``<img onerror=...>``, ``|`` or ``[x](javascript:...)`` must show as text, not become HTML, a
link or an extra table column. :func:`md_text` backslash-escapes the markdown punctuation that can start
inline markup (CommonMark: any ASCII punctuation may be escaped) and writes ``&``, ``<``, ``>`` as HTML
entities (raw HTML in markdown is passed through by renderers); an underscore between two letters or
digits is left as it is (it cannot open emphasis there: ``bias_test`` stays readable). :func:`md_code`
puts text in a code span that no backtick inside it can close. Line breaks become spaces (a table row or a
bullet is one line).
"""

from __future__ import annotations

import re

import pandas as pd

# markdown punctuation that can open inline markup in a line (emphasis, code, links, images, strikethrough,
# tables, autolinks); '<', '>' and '&' become entities instead
_MARKUP = re.compile(r"([\\`*\[\]|~!])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_LINE_BREAKS = re.compile(r"[\r\n\t\x0b\x0c]+")


def md_text(value) -> str:
    """``value`` as inert markdown text (see the module docstring)."""
    text = _LINE_BREAKS.sub(" ", str(value))
    text = "".join(_ENTITIES.get(c, c) for c in text)
    return _MARKUP.sub(lambda m: "\\" + m.group(0), text)


def md_code(value) -> str:
    """``value`` as a markdown code span: fenced by one backtick more than its longest run of backticks
    (padded with spaces when it starts or ends with one), on one line."""
    text = _LINE_BREAKS.sub(" ", str(value))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escaped_table(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its column names and every text cell as :func:`md_text` (numbers, booleans and
    missing values as they are), for a markdown table."""
    out = table.copy()
    out.columns = [md_text(c) for c in table.columns]
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if column.dtype == object or pd.api.types.is_string_dtype(column):
            out.iloc[:, i] = column.map(lambda v: md_text(v) if isinstance(v, str) else v)
    return out
