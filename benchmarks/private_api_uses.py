"""List the uses of other libraries' private APIs in src/ at a git revision, one per line (file:line).

Usage: ``python benchmarks/private_api_uses.py [REV]`` (default HEAD; ``--worktree`` reads the files on
disk). Not a speed benchmark: the count the review of issue 32 asks for, computed the same way on
both sides of a change. What counts, read from the AST of every module under src/:

* an import of a private module or name of another package (``from hydra._internal... import``,
  ``from x import _y``), or a dotted string naming one (``"hydra._internal.core_plugins..."``, a Hydra
  ``_target_``);
* an attribute ``obj._name`` or ``getattr/hasattr(obj, "_name")`` (one leading underscore, not a dunder)
  whose name speechbias never defines itself (no def, class, assignment, argument or import of it
  anywhere in src/), so it belongs to a library: ``module._buffers``, ``self._modules`` on an
  ``nn.Module``, ``torch._fused_adam_``;
* except the underscore names that are documented public API: ``os._exit``, ``sys._getframe``, and
  namedtuple's ``_asdict`` / ``_replace`` / ``_fields`` / ``_make``.

The uses inside src/speechbias/library_internals/ (the one place the house rules allow them, each behind
a checked version bound) are counted apart. Warning filters that match a message by its exact text are
brittle too but are no private API; they are listed apart (``--warning-filters``) and not counted.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN_PACKAGES = ("speechbias", "hydra_plugins.speechbias_launcher")
# documented underscore names: os._exit, sys._getframe, namedtuple methods, Hydra's config keys
DOCUMENTED_PUBLIC = {"_exit", "_getframe", "_asdict", "_replace", "_fields", "_make"}
HYDRA_KEYS = {"_target_", "_recursive_", "_convert_", "_partial_", "_args_"}
INTERNALS = "src/speechbias/library_internals/"  # where the house rules allow them
REGISTERS = {"register_buffer", "register_parameter", "register_module", "add_module"}
PRIVATE_PATH = re.compile(r"^[a-z_][\w]*(\.\w+)*\._[a-z]\w*(\.\w+)*$")


def sources(rev: str | None) -> dict[str, str]:
    """{path: text} of every .py file under src/ at ``rev`` (None: the files on disk)."""
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "src").rglob("*.py"))}
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", "src"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return {
        n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
        for n in names
        if n.endswith(".py")
    }


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in DOCUMENTED_PUBLIC | HYDRA_KEYS


def is_own(module: str) -> bool:
    return any(module == own or module.startswith(own + ".") for own in OWN_PACKAGES)


def own_names(trees: dict[str, ast.AST]) -> set[str]:
    """Every underscore name speechbias defines itself (functions, classes, assignments, arguments, imports)."""
    names = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1:
                if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    names.add(node.args[1].value)
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in REGISTERS and node.args:
                if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    names.add(node.args[0].value)  # nn.Module.register_buffer("_name", ...)
    return {n for n in names if n.startswith("_")}


def private_uses(path: str, tree: ast.AST, own: set[str]) -> list[str]:
    """``path:line: what`` for each private use in one module."""
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not is_own(node.module):
                parts = node.module.split(".") + [a.name for a in node.names]
                if any(is_private(p) for p in parts):
                    what = f"from {node.module} import {', '.join(a.name for a in node.names)}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not is_own(alias.name) and any(is_private(p) for p in alias.name.split(".")):
                    what = f"import {alias.name}"
        elif isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in own:
            what = f"{ast.unparse(node)}"
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr"):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                if is_private(node.args[1].value) and node.args[1].value not in own:
                    what = ast.unparse(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PRIVATE_PATH.match(node.value):
            if not is_own(node.value) and any(is_private(p) for p in node.value.split(".")):
                what = repr(node.value)
        if what is not None:
            found.append((node.lineno, f"{path}:{node.lineno}: {what}"))
    return [line for _, line in sorted(set(found))]  # one per line and expression


def warning_filters(path: str, tree: ast.AST) -> list[str]:
    """``path:line`` of each ``filterwarnings(..., message=...)`` call (a match on a message's text)."""
    return [
        f"{path}:{node.lineno}: {ast.unparse(node)[:100]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "filterwarnings"
        and any(k.arg == "message" for k in node.keywords)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rev", nargs="?", default="HEAD", help="git revision (default HEAD)")
    parser.add_argument("--worktree", action="store_true", help="read the files on disk instead of a revision")
    parser.add_argument("--warning-filters", action="store_true", help="also list message-text warning filters")
    args = parser.parse_args()
    trees = {p: ast.parse(t, p) for p, t in sources(None if args.worktree else args.rev).items()}
    own = own_names(trees)
    uses = [line for p, tree in trees.items() for line in private_uses(p, tree, own)]
    print("\n".join(uses))
    where = "the work tree" if args.worktree else args.rev
    confined = [u for u in uses if u.startswith(INTERNALS)]
    print(f"{len(uses)} private-API uses in src/ at {where}: {len(uses) - len(confined)} outside {INTERNALS}")
    if args.warning_filters:
        filters = [line for p, tree in trees.items() for line in warning_filters(p, tree)]
        print("\n".join(filters))
        print(f"{len(filters)} warning filters by message text (not counted above)")


if __name__ == "__main__":
    sys.exit(main())
