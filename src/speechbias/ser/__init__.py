"""Speech emotion recognition (valence) head trained on cached per-layer temporal means.

:mod:`.head` the linear head (and its full-sequence twin), :mod:`.module` the LightningModule,
:mod:`.datamodule` loaders over in-memory means, :mod:`.valence` valence sets and rating scales,
:mod:`.split` train/dev split, :mod:`.fit` checkpoints and resume, :mod:`.heads_adam` +
:mod:`.compiled_step` the CPU fast path of the training step (numba), :mod:`.pooling` Cohen's d per
head and pooled over heads (learning rates).
"""
