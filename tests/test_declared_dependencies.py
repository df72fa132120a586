"""pyproject.toml declares every distribution that the code under src/ imports.

Every import of every module (module level, function level, ``importlib.import_module("...")`` with a
literal name) is mapped to the distribution that installs it (``importlib.metadata``); that distribution
must be in ``[project].dependencies``, unless the import is one of the few optional ones below, which an
extra provides and which the code only imports inside a function or a ``try`` block (so the project runs
without them).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

REPO = Path(__file__).resolve().parents[1]
OWN = ("speechbias", "hydra_plugins.speechbias_launcher")

#: optional imports: top-level module -> (extra, the requirement of that extra which brings it)
OPTIONAL = {
    "s3prl": ("s3prl", "s3prl"),
    "torchaudio": ("s3prl", "s3prl"),  # a dependency of s3prl (README: 'Any s3prl upstream')
    "wandb_workspaces": ("report", "wandb[workspaces]"),
}


@dataclass(frozen=True)
class Import:
    module: str  # the dotted name imported
    where: str  # path:line
    guarded: bool  # inside a function or a try block (the module imports without it)


def normalize(name: str) -> str:
    """PEP 503 name: ``RapidFuzz`` -> ``rapidfuzz``, ``hydra_core`` -> ``hydra-core``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """``"wandb[workspaces]>=0.19"`` -> ``"wandb"`` (normalized)."""
    return normalize(re.match(r"[A-Za-z0-9._-]+", requirement.strip()).group(0))


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, where: str):
        self.where, self.depth, self.found = where, 0, []

    def _nested(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Try = _nested
    visit_TryStar = _nested

    def _add(self, module: str, node: ast.AST) -> None:
        self.found.append(Import(module, f"{self.where}:{node.lineno}", self.depth > 0))

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            self._add(node.module, node)

    def visit_Call(self, node):
        if getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module" and node.args:
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                self._add(node.args[0].value, node)
        self.generic_visit(node)


def third_party_imports() -> list[Import]:
    found = []
    for path in sorted((REPO / "src").rglob("*.py")):
        collector = _ImportCollector(str(path.relative_to(REPO)))
        collector.visit(ast.parse(path.read_text(), str(path)))
        found += collector.found
    return [
        i
        for i in found
        if i.module.split(".")[0] not in sys.stdlib_module_names
        and not any(i.module == own or i.module.startswith(own + ".") for own in OWN)
    ]


@cache
def _packages() -> dict[str, list[str]]:
    return metadata.packages_distributions()


@cache
def _files_of(distribution: str) -> tuple[str, ...]:
    return tuple(str(f) for f in (metadata.distribution(distribution).files or ()))


def distributions_of(module: str) -> set[str]:
    """The installed distributions (normalized) that provide ``module``; for a namespace package shared
    by several (``hydra_plugins``), the ones holding its subpackage. Empty when none is installed."""
    parts = module.split(".")
    candidates = set(_packages().get(parts[0], ()))
    if len(candidates) > 1 and len(parts) > 1:
        candidates = {d for d in candidates if any(f.startswith(f"{parts[0]}/{parts[1]}/") for f in _files_of(d))}
    return {normalize(d) for d in candidates}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    required = {requirement_name(r) for r in project["dependencies"]}
    extras = {  # extra -> its requirements without versions, e.g. {"report": {"wandb[workspaces]"}}
        extra: {re.split(r"[<>=!~;@ ]", r.strip(), maxsplit=1)[0] for r in reqs}
        for extra, reqs in project["optional-dependencies"].items()
    }
    return required, extras


def test_normalize_and_requirement_names():
    assert normalize("RapidFuzz") == "rapidfuzz" and normalize("hydra_core") == "hydra-core"
    assert requirement_name("wandb[workspaces]>=0.19") == "wandb"
    assert requirement_name("torch>=2.4,<2.15") == "torch" and requirement_name("rouge-score>=0.1.2") == "rouge-score"


def test_the_collector_sees_function_level_and_import_module_imports():
    source = (
        "import os, numpy as np\nfrom scipy import stats\nimport importlib\n"
        "def f():\n    import rapidfuzz.process\n    importlib.import_module('s3prl.nn')\n"
        "try:\n    import torchaudio\nexcept ImportError:\n    pass\nfrom . import sibling\n"
    )
    collector = _ImportCollector("m.py")
    collector.visit(ast.parse(source))
    got = [(i.module, i.where, i.guarded) for i in collector.found]
    assert got == [
        ("os", "m.py:1", False),
        ("numpy", "m.py:1", False),
        ("scipy", "m.py:2", False),
        ("importlib", "m.py:3", False),
        ("rapidfuzz.process", "m.py:5", True),
        ("s3prl.nn", "m.py:6", True),
        ("torchaudio", "m.py:8", True),
    ]


def test_a_namespace_package_maps_to_the_distribution_of_its_subpackage():
    assert distributions_of("hydra_plugins.hydra_submitit_launcher.config") == {"hydra-submitit-launcher"}
    assert distributions_of("hydra_plugins.hydra_joblib_launcher") == {"hydra-joblib-launcher"}
    assert distributions_of("yaml") == {"pyyaml"} and distributions_of("no_such_module_here") == set()


def test_every_imported_distribution_is_declared():
    required, extras = declared()
    problems = []
    for imp in third_party_imports():
        top = imp.module.split(".")[0]
        if top in OPTIONAL:
            extra, requirement = OPTIONAL[top]
            if requirement not in extras.get(extra, set()):
                problems.append(f"{imp.where}: {imp.module} is optional, but extra '{extra}' lacks {requirement}")
            if not imp.guarded:
                problems.append(f"{imp.where}: {imp.module} is optional (extra '{extra}') but imported unguarded")
            continue
        provided_by = distributions_of(imp.module)
        if not provided_by:
            problems.append(f"{imp.where}: {imp.module} is imported but not installed and not declared")
        elif not provided_by & required:
            problems.append(
                f"{imp.where}: {imp.module} comes from {sorted(provided_by)}, not in [project] dependencies"
            )
    assert not problems, "\n".join(problems)


def test_the_optional_imports_are_still_imported():
    """An entry of OPTIONAL that the code no longer imports is stale."""
    imported = {i.module.split(".")[0] for i in third_party_imports()}
    assert set(OPTIONAL) <= imported, sorted(set(OPTIONAL) - imported)
