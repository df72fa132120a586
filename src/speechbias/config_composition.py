"""A bias test's config by name, composed by Hydra exactly as ``bias_test=<name>`` composes it.

``conf/bias_test/<name>.yaml`` may take shared parts through its defaults list (the corpus-built
tests take ``conf/bias_test_base/corpus_built.yaml``), so reading the file alone is not its config.
train.py's ``bias_tests=[...]`` and the pre-torch checks use :func:`bias_test_config` to get the same
node evaluate.py gets; a job's list of tests (``bias_test=[a,b]``) is composed in one compose
(:func:`bias_test_configs`: Hydra's own config, most of a compose's ~60 ms, once). Import-light (hydra and omegaconf only; the one Hydra internal it needs is in
:mod:`speechbias.library_internals.hydra`): the config checks run before torch.
"""

from __future__ import annotations

import copy
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.library_internals.hydra import isolated_global_hydra

# composed bias_test nodes by (name, config folder, composed by the running app or not, the files they
# may come from as they were):
# a run needs each of its tests twice (the config checks, then the task's loader) and composes it once
_composed: dict[tuple, DictConfig] = {}
# where bias_test_configs has Hydra place each test's node in the config it composes
COMPOSED_PACKAGE = "speechbias_bias_tests"


def known_bias_tests(config_dir: str | Path) -> list[str]:
    """Names of the bias tests in ``<config_dir>/bias_test/``."""
    return sorted(p.stem for p in (Path(config_dir) / "bias_test").glob("*.yaml"))


def bias_test_path(name: str, config_dir: str | Path) -> Path:
    """``<config_dir>/bias_test/<name>.yaml``; ValueError naming the known tests when it does not exist."""
    path = Path(config_dir) / "bias_test" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(
            f"bias_tests: no bias test {name!r} ({path} does not exist); "
            f"known: {', '.join(known_bias_tests(config_dir))}"
        )
    return path


def bias_test_config(name: str, config_dir: str | Path) -> DictConfig:
    """The ``bias_test`` node of ``bias_test=<name>`` (its defaults list applied, interpolations such as
    ``${paths.*}`` and ``${seed}`` left for the caller to resolve), composed from ``config_dir``.

    Inside a running Hydra app (or an active ``initialize_config_dir``) whose primary config folder is
    ``config_dir`` the app's Hydra composes it; otherwise a temporary one over ``config_dir`` does.
    """
    return bias_test_configs([name], config_dir)[name]


def bias_test_configs(names, config_dir: str | Path) -> dict[str, DictConfig]:
    """``{name: bias_test_config(name, config_dir)}`` of several tests, those not composed yet in one
    compose: each test's node at a package of its own (``+bias_test@<package>=<name>``, its defaults list
    applied there as at ``bias_test``), ~60 ms for Hydra's own config once instead of once per test."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    names = list(dict.fromkeys(str(n) for n in names))
    for name in names:
        bias_test_path(name, config_dir)
    folder = str(Path(config_dir).resolve())
    hydra = GlobalHydra.instance()
    in_app = hydra.is_initialized() and _primary_dir(hydra) == folder  # the app's search path, or the folder's
    sources = _source_files(folder)
    missing = [n for n in names if (n, folder, in_app, sources) not in _composed]
    if missing:
        packages = {name: f"{COMPOSED_PACKAGE}.test{i}" for i, name in enumerate(missing)}
        overrides = [f"+bias_test@{package}={name}" for name, package in packages.items()]
        if in_app:
            composed = compose(overrides=overrides)
        else:
            with isolated_global_hydra():
                with initialize_config_dir(config_dir=folder, version_base=None):
                    composed = compose(overrides=overrides)
        for name, package in packages.items():
            _composed[(name, folder, in_app, sources)] = OmegaConf.select(composed, package)
    return {n: copy.deepcopy(_composed[(n, folder, in_app, sources)]) for n in names}  # the caller may change it


def _source_files(folder: str) -> tuple:
    """(path, size, mtime) of every file a ``bias_test`` node can be composed from (``bias_test/`` and
    the shared parts of ``bias_test_base/``): a composed node is reused only while they are unchanged."""
    files = sorted(p for group in ("bias_test", "bias_test_base") for p in (Path(folder) / group).glob("*.yaml"))
    return tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])


def _primary_dir(hydra) -> str | None:
    """The primary (main, file) config folder of an initialized GlobalHydra (its config loader's sources,
    Hydra's plugin interface)."""
    for source in hydra.config_loader().get_sources():
        if source.provider == "main" and source.scheme() == "file":
            return str(Path(source.path).resolve())
    return None
