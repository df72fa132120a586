"""speechbias.roles: the X/Y/A/B split of row-aligned arrays, defined once."""

from __future__ import annotations

import numpy as np

from speechbias.roles import ROLES, split_roles


def test_split_roles_keeps_row_order_and_gives_every_role():
    array = np.arange(12).reshape(6, 2)
    parts = split_roles(array, ["A", "X", "Y", "X", "A", "Y"])
    assert tuple(parts) == ROLES == ("X", "Y", "A", "B")
    assert parts["X"].tolist() == [[2, 3], [6, 7]] and parts["A"].tolist() == [[0, 1], [8, 9]]
    assert parts["B"].shape == (0, 2)  # no B rows: an empty (0, D) array
