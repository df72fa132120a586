"""The version check shared by the library_internals modules."""

from __future__ import annotations

import re


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string: ``"2.13.0+cpu"`` -> ``(2, 13)``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"cannot read a version number from {version!r}")
    return int(match.group(1)), int(match.group(2))


def within(version: str, lower: tuple[int, int], upper: tuple[int, int]) -> bool:
    """Whether ``version`` lies in [lower, upper) by (major, minor)."""
    return lower <= release(version) < upper


def bound_text(lower: tuple[int, int], upper: tuple[int, int]) -> str:
    """``(2, 4), (2, 15)`` -> ``">=2.4,<2.15"``."""
    return f">={lower[0]}.{lower[1]},<{upper[0]}.{upper[1]}"
