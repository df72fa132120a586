"""Record the per-block states of a transformer encoder with forward hooks.

Layer convention ``block-io-v1`` (the same for every family): state 0 is the input to the first
block, state l is the output of block l exactly as that block returns it. Whatever the encoder does
after its last block (a final LayerNorm, an adapter) is not recorded. We hook the blocks instead of
reading ``output_hidden_states`` because what its last entry holds differs between families and
transformers releases (see tests/upstream/test_layer_convention.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from speechbias.upstream.hf_identity import LAYER_CONVENTION as LAYER_CONVENTION

LAYER_CONVENTION_TEXT = (
    "layer 0 = input to the first transformer block; layer l = output of block l exactly as the "
    "block emits it (no extra final LayerNorm); num_layers = n_blocks + 1"
)


def _first_tensor(value) -> torch.Tensor:
    """A block's hidden states: the tensor itself or the first element of a returned tuple."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    hidden = getattr(value, "last_hidden_state", None)  # a ModelOutput-like return
    if isinstance(hidden, torch.Tensor):
        return hidden
    raise TypeError(f"cannot find the hidden states in a block output of type {type(value).__name__}")


class BlockStateRecorder:
    """Hooks on ``blocks`` that collect ``len(blocks) + 1`` states during one recorded forward.

    Use ``with recorder.recording() as states: model(...)``; ``states`` is then the list of
    (B, T, D) tensors. Outside ``recording()`` the hooks do nothing.
    """

    def __init__(self, blocks: Sequence[nn.Module]):
        if len(blocks) == 0:
            raise ValueError("blocks is empty: the encoder has no transformer blocks to record")
        self.num_blocks = len(blocks)
        self._states: list[torch.Tensor] | None = None
        self._handles = [blocks[0].register_forward_pre_hook(self._record_input, with_kwargs=True)]
        self._handles += [block.register_forward_hook(self._record_output) for block in blocks]

    def _record_input(self, module, args, kwargs):
        if self._states is not None:
            hidden = args[0] if args else kwargs["hidden_states"]
            self._states.append(hidden)

    def _record_output(self, module, args, output):
        if self._states is not None:
            self._states.append(_first_tensor(output))

    def recording(self) -> _Recording:
        return _Recording(self)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class _Recording:
    def __init__(self, recorder: BlockStateRecorder):
        self.recorder = recorder
        self.states: list[torch.Tensor] = []

    def __enter__(self) -> list[torch.Tensor]:
        self.recorder._states = self.states
        return self.states

    def __exit__(self, *exc) -> None:
        self.recorder._states = None
        if exc[0] is None and len(self.states) != self.recorder.num_blocks + 1:
            raise RuntimeError(
                f"recorded {len(self.states)} block states, expected {self.recorder.num_blocks + 1}: "
                "a block was skipped (LayerDrop in training mode?) or ran twice"
            )
