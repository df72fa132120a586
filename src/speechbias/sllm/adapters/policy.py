"""Scripted answer policies with the adapter interface: end-to-end checks and baselines as "models".

A policy answers by reading each request's ``answer_key`` (letter -> continuation kind), which model
adapters never see. ``stereotypical`` / ``anti-stereotypical`` / ``irrelevant`` always answer that
continuation's letter; ``random`` a seeded uniform letter (per prompt, so reruns agree); ``refuse``
a sentence that maps to no option. Run through the whole pipeline, ``stereotypical`` must score
slifs 100, slms 100, slbs 100 whatever the option order: a test of prompts, mapping and metrics.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from speechbias.sllm import CONTINUATION_KINDS
from speechbias.sllm.adapters.base import ChatInput, SamplingParams, SpeechLLM

POLICIES = CONTINUATION_KINDS + ("random", "refuse")
STYLES = {"letter": "{letter}", "sentence": "The answer is ({letter})."}


class PolicyAdapter(SpeechLLM):
    def __init__(self, policy: str = "stereotypical", style: str = "letter", seed: int = 0, name: str | None = None):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if style not in STYLES:
            raise ValueError(f"style must be one of {sorted(STYLES)}, got {style!r}")
        self.policy, self.style, self.seed = policy, style, int(seed)
        self.name = name or f"policy_{policy}"

    def fingerprint_fields(self) -> dict:
        return {"adapter": "policy", "policy": self.policy, "style": self.style, "seed": self.seed}

    def _answer(self, inp: ChatInput) -> str:
        if self.policy == "refuse":
            return "I cannot choose between these options."
        if inp.answer_key is None:
            raise ValueError("PolicyAdapter needs ChatInput.answer_key (letter -> continuation kind)")
        if self.policy == "random":
            rng = np.random.default_rng(
                [self.seed, zlib.crc32(inp.prompt.encode()), zlib.crc32(str(inp.audio_path).encode())]
            )
            letter = sorted(inp.answer_key)[int(rng.integers(len(inp.answer_key)))]
        else:
            letter = next(k for k, kind in inp.answer_key.items() if kind == self.policy)
        return STYLES[self.style].format(letter=letter)

    def generate(self, inputs: Sequence[ChatInput], sampling: SamplingParams) -> list[str]:
        return [self._answer(inp) for inp in inputs]
