"""transformers internals that speechbias cannot avoid, behind the transformers versions they were
checked with (a clear error outside them).

* :func:`init_module_weights`: ``PreTrainedModel._init_weights(module)``, the family's own initializer
  for one module (the documented override point for model authors). The public ``init_weights()`` /
  ``initialize_weights()`` skip every module already initialized (transformers flags each one while it
  builds the model), so a weight its first pass could not reach (a weight-normed one: the initializer
  fills a temporary computed by the parametrization) has no public way back to the family's rule once
  the parametrization is baked into a plain parameter.
"""

from __future__ import annotations

from torch import nn

from speechbias.library_internals.version_bound import bound_text, within

#: [lower, upper) of the transformers releases checked (pyproject's transformers range)
CHECKED = ((5, 0), (6, 0))


def init_module_weights(model: nn.Module, module: nn.Module) -> None:
    """Draw ``module``'s weights (a submodule of the transformers ``model``) by ``model``'s initializer,
    from the current RNG state."""
    import transformers

    if not within(transformers.__version__, *CHECKED):
        raise RuntimeError(
            f"transformers {transformers.__version__} is outside {bound_text(*CHECKED)}, the versions whose "
            "per-module initializer (PreTrainedModel._init_weights) speechbias's random init was checked with"
        )
    model._init_weights(module)
