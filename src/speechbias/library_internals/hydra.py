"""Hydra internals that speechbias cannot avoid, behind the Hydra versions they were checked with (a clear
error outside them).

* :func:`isolated_global_hydra`: set an initialized ``GlobalHydra`` aside for a nested compose and put it
  back afterwards. A bias test named in train.py's ``bias_tests=[...]`` is composed as ``bias_test=<name>``
  composes it (its defaults list applied). Inside the running app Hydra's public ``compose()`` does it;
  but when the process's GlobalHydra belongs to another config folder (a test's ``initialize_config_dir``
  over a tmp folder, a library caller), the public ``initialize_config_dir`` refuses to start while one is
  initialized, and its ``GlobalHydra.instance().clear()`` advice loses the caller's: the saved
  ``GlobalHydra.hydra`` object is put back with ``GlobalHydra.initialize`` (whose argument is
  ``hydra._internal.hydra.Hydra``).
"""

from __future__ import annotations

from contextlib import contextmanager

from speechbias.library_internals.version_bound import bound_text, within

#: [lower, upper) of the hydra-core releases checked (pyproject's hydra-core range)
CHECKED = ((1, 3), (1, 4))


def check_version() -> None:
    """RuntimeError when the installed hydra-core is outside :data:`CHECKED`."""
    import hydra

    if not within(hydra.__version__, *CHECKED):
        raise RuntimeError(
            f"hydra-core {hydra.__version__} is outside {bound_text(*CHECKED)}, the versions whose GlobalHydra "
            "speechbias sets aside for a nested compose (speechbias.library_internals.hydra)"
        )


@contextmanager
def isolated_global_hydra():
    """Run the block with no GlobalHydra initialized; the one initialized before (if any) is restored."""
    from hydra.core.global_hydra import GlobalHydra

    instance = GlobalHydra.instance()
    saved = instance.hydra if instance.is_initialized() else None
    if saved is not None:
        check_version()
        instance.clear()
    try:
        yield
    finally:
        if saved is not None:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(saved)
