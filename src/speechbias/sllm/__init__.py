"""Spoken StereoSet (Lin et al., 2024): does a speech LLM pick stereotyped continuations depending on who speaks?

Modules, in data-flow order:

- :mod:`~speechbias.sllm.data` loads the released layout (``metadata/<domain>_v1.0.csv`` +
  ``speech/<domain>/<id:05d>_<speaker>.wav``); :mod:`~speechbias.sllm.builder` makes a new set in the same
  layout from text items through a :mod:`~speechbias.sllm.tts` backend.
- :mod:`~speechbias.sllm.statistics` (+ :mod:`~speechbias.sllm.rouge`): the paper's Table 2 and Fig. 1.
- :mod:`~speechbias.sllm.prompts`: multiple-choice prompts under seeded option orders.
- :mod:`~speechbias.sllm.adapters`: speech LLMs (Qwen2-Audio, generic chat-template audio LLMs, scripted policies).
- :mod:`~speechbias.sllm.probe`: batched generation with a per-item response cache.
- :mod:`~speechbias.sllm.answers`: free-form answer -> choice by a rule cascade (letter rules, text rules,
  CER, optional LLM judge), recording the rule that decided.
- :mod:`~speechbias.sllm.metrics` and :mod:`~speechbias.sllm.baselines`: slifs, slms, slbs.
- :mod:`~speechbias.sllm.tables`: the paper's Table 3 form.
"""

#: The three continuation kinds, named as the released CSV's columns.
STEREOTYPICAL = "stereotypical"
ANTI_STEREOTYPICAL = "anti-stereotypical"
IRRELEVANT = "irrelevant"
CONTINUATION_KINDS = (STEREOTYPICAL, ANTI_STEREOTYPICAL, IRRELEVANT)
#: The choice of an answer that maps to none of the three continuations.
OTHER = "other"
