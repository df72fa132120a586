"""The lint and format check runs the same ruff in CI and in the pre-commit hook."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_pre_commit_hook_uses_the_ruff_the_test_extra_pins():
    pinned = re.search(r'"ruff==([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    config = (REPO / ".pre-commit-config.yaml").read_text()
    assert re.search(r"repo: https://github.com/astral-sh/ruff-pre-commit\s+rev: v(\S+)", config).group(1) == pinned
    assert "id: ruff-check" in config and "id: ruff-format" in config


def test_ci_checks_lint_and_format_before_the_tests():
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    install = next(i for i, line in enumerate(lines) if line.startswith("python -m pip install") and "[test]" in line)
    first_pytest = next(i for i, line in enumerate(lines) if line.startswith("python -m pytest"))
    assert install < lines.index("ruff check .") < first_pytest
    assert install < lines.index("ruff format --check .") < first_pytest
