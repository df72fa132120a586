"""Where a relative path typed on the command line points: the working directory, else the project.

Runs and sweeps are written under the project folder (``paths.root_dir``, the folder of
``evaluate.py``) whatever the working directory, so ``sweep_dir=multirun/paper_speat`` typed in
another folder must still find the sweep. Rule: an absolute path is kept; a relative one is taken
from the working directory when it exists there, else from the project folder.
"""

from __future__ import annotations

from pathlib import Path


def user_path(value: str | Path, project_root: str | Path | None) -> Path:
    """``value`` as an absolute path by the rule above (``~`` expanded; no ``project_root``: the cwd)."""
    path = Path(str(value)).expanduser()
    if path.is_absolute():
        return path
    here = Path.cwd() / path
    if here.exists():
        return here.resolve()
    return (Path(str(project_root or Path.cwd())) / path).resolve()
