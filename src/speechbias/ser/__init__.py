"""Speech emotion recognition (valence) head trained on cached per-layer temporal means.

:mod:`.head` the linear head (and its full-sequence twin), :mod:`.module` the LightningModule,
:mod:`.datamodule` loaders over in-memory means, :mod:`.valence` valence sets and rating scales,
:mod:`.split` train/dev split, :mod:`.fit` checkpoints and resume, :mod:`.in_memory` the same
training as a plain torch loop (no Lightning overhead), :mod:`.stacked_heads` the heads' closed-form
training step, :mod:`.fused_adam` torch's fused Adam with less per-step Python, :mod:`.pooling`
Cohen's d per head and pooled over heads (learning rates).
"""
