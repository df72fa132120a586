"""torch internals that speechbias cannot avoid, each behind the torch versions it was checked with.

* :func:`drop_weight_norm_compat_hooks`: ``torch.nn.utils.parametrizations.weight_norm`` registers a
  local function as a ``load_state_dict`` pre-hook (it renames old ``weight_g`` / ``weight_v`` keys) and
  keeps no handle to it; ``remove_parametrizations`` leaves it behind. A local function does not pickle,
  so a module that once had weight norm (wav2vec2's positional convolution) could not be sent to a
  ``ddp_spawn`` worker. torch has no public way to remove a hook that it registered itself, so this
  deletes it from ``Module._load_state_dict_pre_hooks``. Outside the checked versions it leaves the hooks
  (the model computes the same; only pickling may fail) and warns.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from speechbias.library_internals.version_bound import bound_text, within

#: [lower, upper) of the torch releases checked (pyproject's torch range)
CHECKED = ((2, 4), (2, 15))
_COMPAT_HOOK = "_weight_norm_compat_hook"


def drop_weight_norm_compat_hooks(model: nn.Module) -> int:
    """Remove weight norm's key-renaming ``load_state_dict`` pre-hooks from ``model`` and its submodules
    (call it once the parametrizations are baked); returns how many were removed."""
    if not within(torch.__version__, *CHECKED):
        warnings.warn(
            f"torch {torch.__version__} is outside {bound_text(*CHECKED)}, the versions whose weight-norm hooks "
            "speechbias removes; a baked model may not pickle (ddp_spawn)",
            stacklevel=2,
        )
        return 0
    removed = 0
    for module in model.modules():
        hooks = module._load_state_dict_pre_hooks  # {handle id: hook}; the hooks keep their function's name
        for key in [k for k, h in hooks.items() if _COMPAT_HOOK in getattr(h, "__qualname__", "")]:
            del hooks[key]
            removed += 1
    return removed
