"""Fixtures shared by the upstream tests."""

from __future__ import annotations

import pytest

from upstream.tiny_models import VARIANTS, build_tiny


@pytest.fixture(scope="module")
def tiny_models() -> dict:
    """One tiny upstream per variant, shared within a test module (they are read-only)."""
    return {(family, stable): build_tiny(family, stable) for family, stable in VARIANTS}
