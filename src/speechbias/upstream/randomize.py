"""Random-network controls: every weight of a model drawn anew under a seed.

``reset_parameters`` does not reach a weight behind a parametrization: wav2vec2's positional
convolution is weight-normed (``torch.nn.utils.parametrizations.weight_norm`` keeps ``original0`` /
``original1`` and computes ``weight`` on access, so ``Conv1d.reset_parameters`` fills a temporary;
the older ``torch.nn.utils.weight_norm`` recomputes ``weight`` from ``weight_g`` / ``weight_v``
before every forward). transformers' own initializer misses it the same way. Both functions
here first bake such weights into plain parameters (the models are frozen, so the computation is
unchanged) and then draw them. Public torch APIs only: a frozen multi-tensor parametrization that torch
leaves as a buffer is found with ``named_buffers``, an old-style weight norm by the ``<name>_g`` /
``<name>_v`` parameter pair it registers (``remove_weight_norm`` then removes its hook).

* :func:`reinitialize` (a loaded model, e.g. an s3prl upstream): bake, then under ``seed`` call every
  module's ``reset_parameters`` and draw each parameter still equal to its loaded value (raw
  ``nn.Parameter`` s that no ``reset_parameters`` covers) as s3prl's ``randomize_upstream`` does:
  >= 2-D ``xavier_normal_``, fewer dims normal with the tensor's own mean and std.
* :func:`init_parametrized_weights` (a model just built from its config by transformers under a seed):
  bake, then re-run the library's initializer on the modules that held parametrized weights.

The global RNG state is left as it was (``torch.random.fork_rng``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils import parametrize

#: name the methods in fingerprints (a change of method changes every randomized upstream's cache key):
#: :func:`reinitialize` (s3prl); transformers' init + :func:`init_parametrized_weights` (HF) is
#: ``hf_identity.HF_RANDOM_INIT``
RANDOM_INIT = "bake-parametrizations+reset-v1"


def bake_parametrized_weights(model: nn.Module) -> list[nn.Module]:
    """Replace parametrized weights (``torch.nn.utils.parametrize``) and old-style weight norm
    (``torch.nn.utils.weight_norm``) by plain parameters holding their current values; return the
    modules that had them."""
    baked = []
    for module in model.modules():
        if parametrize.is_parametrized(module):
            for name in list(module.parametrizations.keys()):
                requires_grad = any(p.requires_grad for p in module.parametrizations[name].parameters())
                parametrize.remove_parametrizations(module, name, leave_parametrized=True)
                if name in dict(module.named_buffers(recurse=False)):  # a frozen multi-tensor one is left a buffer
                    value = module.get_buffer(name)
                    delattr(module, name)
                    module.register_parameter(name, nn.Parameter(value, requires_grad=requires_grad))
            baked.append(module)
        for name in _weight_norm_pair_names(module):
            try:
                torch.nn.utils.remove_weight_norm(module, name)
            except ValueError:  # a <name>_g / <name>_v pair of plain parameters, no weight norm
                continue
            baked.append(module)
    return baked


def _weight_norm_pair_names(module: nn.Module) -> list[str]:
    """``<name>`` of each ``<name>_g`` / ``<name>_v`` parameter pair of ``module`` (the pair that
    ``torch.nn.utils.weight_norm`` registers), in the order they were registered."""
    params = [n for n, _ in module.named_parameters(recurse=False)]
    return [n.removesuffix("_g") for n in params if n.endswith("_g") and f"{n.removesuffix('_g')}_v" in params]


def _draw_like_s3prl(param: torch.Tensor) -> None:
    """s3prl's ``randomize_upstream`` rule: >= 2-D xavier normal; else normal(mean, std) of the tensor."""
    if param.dim() >= 2:
        nn.init.xavier_normal_(param)
    else:
        std = param.std().item() if param.numel() > 1 else 0.0
        nn.init.normal_(param, mean=param.mean().item(), std=std)


def reinitialize(model: nn.Module, seed: int) -> list[str]:
    """Draw every weight of a loaded ``model`` anew under ``seed`` (see the module docstring). Returns
    the names of the parameters drawn by the fallback rule (no ``reset_parameters`` reached them)."""
    bake_parametrized_weights(model)
    loaded = {name: p.detach().clone() for name, p in model.named_parameters()}
    fallback = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
        for name, param in model.named_parameters():
            if torch.equal(param, loaded[name]):
                _draw_like_s3prl(param)
                fallback.append(name)
    return fallback


def init_parametrized_weights(model: nn.Module, init_module: Callable[[nn.Module], None]) -> int:
    """Bake ``model``'s parametrized weights and apply ``init_module`` (for a transformers model,
    :func:`speechbias.library_internals.transformers.init_module_weights`) to each module that had them
    and to its parent (transformers initialises the weight-normed convolution from its parent module). Draws from the current RNG state; call it inside
    the seeded block that built the model. Returns the number of modules baked."""
    baked = bake_parametrized_weights(model)
    if not baked:
        return 0
    parents = {id(child): parent for parent in model.modules() for child in parent.children()}
    with torch.no_grad():
        for module in baked:
            for target in (module, parents.get(id(module))):
                if target is not None:
                    init_module(target)
    return len(baked)
