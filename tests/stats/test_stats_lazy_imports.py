"""speechbias.stats imports its names on first use: the SpEAT statistics load without statsmodels/scipy.stats/pandas."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_speat_statistics_import_none_of_the_heavy_libraries():
    code = (
        "import sys; from speechbias.stats import speat, bootstrap_se, permutation_test; "
        "print(sorted(m for m in ('statsmodels', 'scipy.stats', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_listed_name_resolves_and_unknown_names_fail():
    import speechbias.stats as stats

    for name in stats.__all__:
        assert getattr(stats, name) is not None, name
    assert set(stats.__all__) <= set(dir(stats))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        stats.nope  # noqa: B018


def test_no_submodule_shadows_a_lazily_imported_name():
    """Importing a submodule sets the package attribute of its name: a submodule named like an exported
    function (association, speat) would turn ``from speechbias.stats import <name>`` into the module once
    another module had imported it directly. Every submodule imported first, every name still resolves
    to what it names."""
    code = (
        "import importlib, pkgutil, types, speechbias.stats as s\n"
        "for m in pkgutil.walk_packages(s.__path__, 'speechbias.stats.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [n for n in s.__all__ if isinstance(getattr(s, n), types.ModuleType)]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
