"""A rank that fails while Hydra builds its task (the task's module does not import, its constructor
raises) records the cause in the sweep table, not Hydra's ``full_key: task.run``."""

from __future__ import annotations

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from speechbias.launch.sweep_status import job_error


def _hydra_error(node: dict) -> InstantiationException:
    with pytest.raises(InstantiationException) as info:
        instantiate({"task": {"run": node}}).task.run  # noqa: B018 - the error is what is wanted
    return info.value


def test_an_import_error_of_the_task_module_names_the_module():
    line = job_error(_hydra_error({"_target_": "speechbias.no_such_module.Task"}))
    assert line.startswith("ImportError: Error loading 'speechbias.no_such_module.Task':")
    assert "No module named 'speechbias.no_such_module'" in line and "\n" not in line


def test_an_error_in_the_task_constructor_names_it_and_the_key():
    line = job_error(_hydra_error({"_target_": "fractions.Fraction", "numerator": "not a number"}))
    assert line.startswith("ValueError: ") and "not a number" in line and line.endswith("(full_key: task.run)")
    assert "\n" not in line
