"""The layers of the package: a module never imports a module of a higher layer.

Every import of every module under ``src/`` is read from its syntax tree (module level, inside functions
and under ``TYPE_CHECKING`` alike; relative imports resolved), so a climbing import fails here before it
ships. The layer order is written out below; a module not named in it fails the test until it is placed.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# lowest first; a module may import its own layer and those below it. Longest matching prefix wins.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ground",
        (
            "speechbias",  # the package itself (its __init__)
            "speechbias.errors",
            "speechbias.checked_settings",
            "speechbias.run_settings",
            "speechbias.console_quieting",
            "speechbias.config_composition",
            "speechbias.run_context",
            "speechbias.project_paths",
            "speechbias.seeding",
            "speechbias.roles",
            "speechbias.optional_torchaudio",
            "speechbias.fileio",
            "speechbias.library_internals",
        ),
    ),
    (
        "domain",
        (
            "speechbias.model_loading",
            "speechbias.aggregation",
            "speechbias.stats",
            "speechbias.upstream",
            "speechbias.features",
            "speechbias.stimuli",
            "speechbias.speat",
            "speechbias.ser",
            "speechbias.asr",
            "speechbias.sllm",
            "speechbias.report",
            "speechbias.results",
        ),
    ),
    ("callbacks", ("speechbias.callbacks",)),
    ("tasks", ("speechbias.tasks",)),
    ("launch", ("speechbias.launch",)),
    ("hydra_plugins", ("hydra_plugins",)),
)


def layer_of(module: str) -> int | None:
    """Index of ``module``'s layer in :data:`LAYERS` (None: not a project module)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, src: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` gives ``a.b`` instead of ``a`` when b is a module)."""
    name = module_name(path, src)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for alias in node.names:
                sub = src.joinpath(*f"{stem}.{alias.name}".split("."))
                is_module = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                found.add(f"{stem}.{alias.name}" if is_module else stem)
    return found


def climbing_imports(src: Path = SRC) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported project module is in a higher layer."""
    climbs = []
    for path in sorted(src.rglob("*.py")):
        importer = module_name(path, src)
        own = layer_of(importer)
        for imported in sorted(imported_modules(path, src)):
            theirs = layer_of(imported)
            if own is not None and theirs is not None and theirs > own:
                climbs.append((importer, imported))
    return climbs


def test_every_module_has_a_layer():
    unplaced = [module_name(p, SRC) for p in sorted(SRC.rglob("*.py")) if layer_of(module_name(p, SRC)) is None]
    assert unplaced == [], f"place these modules in a layer of LAYERS: {unplaced}"


def test_no_module_imports_a_higher_layer():
    climbs = climbing_imports()
    names = [LAYERS[i][0] for i in range(len(LAYERS))]
    shown = [f"{a} ({names[layer_of(a)]}) imports {b} ({names[layer_of(b)]})" for a, b in climbs]
    assert shown == [], "imports that climb a layer:\n" + "\n".join(shown)


def test_the_reader_finds_function_level_and_relative_imports(tmp_path):
    """The reader itself, on a made-up package: a function-level import and a relative one climb."""
    pkg = tmp_path / "speechbias" / "fileio"
    pkg.mkdir(parents=True)
    (tmp_path / "speechbias" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    for folder in ("launch", "tasks"):
        (tmp_path / "speechbias" / folder).mkdir()
        (tmp_path / "speechbias" / folder / "__init__.py").write_text("")
    (tmp_path / "speechbias" / "tasks" / "speat.py").write_text("")
    (pkg / "audio.py").write_text("")
    (pkg / "low.py").write_text(
        "import os\n"
        "from . import audio\n"
        "def f():\n"
        "    from speechbias.launch.entry import run_task\n"
        "    from ..tasks import speat\n"
    )
    climbs = sorted(climbing_imports(tmp_path))
    assert climbs == [
        ("speechbias.fileio.low", "speechbias.launch.entry"),
        ("speechbias.fileio.low", "speechbias.tasks.speat"),
    ]
