"""The four stimulus roles of a bias test and the split of row-aligned arrays by role.

X and Y are the target groups (e.g. female and male voices); A and B the attribute poles
(pleasant, unpleasant). A manifest's ``role`` column holds one of them per clip. Import-light on
purpose (numpy only): statistics, callbacks and manifests all use it.
"""

from __future__ import annotations

import numpy as np

ROLES = ("X", "Y", "A", "B")


def split_roles(array: np.ndarray, roles) -> dict[str, np.ndarray]:
    """Rows of ``array`` (N, ...) by role: ``{"X": rows with role X, "Y": ..., "A": ..., "B": ...}``.

    ``roles``: (N,) role of each row (a manifest's ``role`` column, in the rows' order); rows keep
    their order within a role, and a role with no rows gets an empty (0, ...) array.
    """
    roles = np.asarray(roles)
    return {role: array[roles == role] for role in ROLES}
