"""Third-party console noise removed by exact message: the one place the project filters what libraries print.

:func:`quiet_third_party_console` drops what Lightning and torch print on every run but says nothing about
it: Lightning's advertising tips (``💡 Tip: ... litlogger``), the accelerator lines for hardware that is
neither present nor used (``TPU available: False``, ``GPU available: False, used: False``), Lightning's
``The srun command is available on your system but is not used`` (printed by every local run on a machine
with SLURM installed: runs that SLURM starts are detected and need no hint), Lightning's ``The number of
training batches (2) is smaller than the logging interval`` (false for the valence head, whose logged loss
window spans epochs as Lightning's logging steps do), and torch's deprecations of
``LeafSpec`` and of ``torch.distributed.nn.functional.all_gather`` that Lightning 2.6 still triggers (every
step, and every DDP gather). Neither library has a public switch for these lines (Lightning's tips and
accelerator lines are INFO records of its ``rank_zero`` loggers, which also carry the lines a user wants;
the deprecations are ``warnings`` raised inside Lightning), so each is matched by its exact text, scoped to
the logger or module that emits it; every other message is left as it is. Imports nothing but the standard
library: the Trainer factory (:mod:`speechbias.launch.lightning_trainer`) and the LightningModules whose
objects ``ddp_spawn`` workers unpickle (extraction, valence head) call it.
"""

from __future__ import annotations

import logging
import re
import warnings

# Lightning's INFO lines (logger ``<package>.utilities.rank_zero``) dropped from the console
LIGHTNING_INFO_NOISE = (
    re.compile(r"^💡 Tip: "),
    re.compile(r"^(TPU|HPU|IPU) available: False"),
    re.compile(r"^GPU available: False, used: False$"),
)
LIGHTNING_INFO_LOGGERS = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
)

# (message regex, category, module regex) of known third-party warnings, each ignored only there
THIRD_PARTY_WARNINGS = (
    # torch >= 2.9 deprecates LeafSpec; pytorch_lightning 2.6 utilities/_pytree.py still builds one per batch
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning, r"pytorch_lightning\.utilities\._pytree"),
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning, r"lightning\.pytorch\.utilities\._pytree"),
    # Lightning's SLURM detection outside SLURM wherever srun is on PATH (a PossibleUserWarning)
    (
        r"The `srun` command is available on your system but is not used",
        UserWarning,
        r"lightning_fabric\.plugins\.environments\.slurm",
    ),
    (
        r"The `srun` command is available on your system but is not used",
        UserWarning,
        r"lightning\.fabric\.plugins\.environments\.slurm",
    ),
    # Lightning's fit loop when an epoch has fewer batches than log_every_n_steps (the demo's 2): false here,
    # since Lightning counts logging steps across epochs and the valence head's loss window spans them too
    (
        r"The number of training batches \(\d+\) is smaller than the logging interval",
        UserWarning,
        r"pytorch_lightning\.loops\.fit_loop",
    ),
    (
        r"The number of training batches \(\d+\) is smaller than the logging interval",
        UserWarning,
        r"lightning\.pytorch\.loops\.fit_loop",
    ),
    # Lightning's checkpoint callback when a run resumes into its own checkpoints/ (train.py resumes there on
    # purpose: tasks/run_markers.claim_checkpoints decides whether the folder's checkpoints are this config's)
    (
        r"Checkpoint directory .* exists and is not empty",
        UserWarning,
        r"pytorch_lightning\.callbacks\.model_checkpoint",
    ),
    (
        r"Checkpoint directory .* exists and is not empty",
        UserWarning,
        r"lightning\.pytorch\.callbacks\.model_checkpoint",
    ),
    # torch deprecates a bool key_padding_mask beside a float attn_mask; transformers' WavLM attention passes both
    (
        r"Support for mismatched key_padding_mask and attn_mask is deprecated",
        UserWarning,
        r"torch\.nn\.functional",
    ),
    # torch >= 2.10 deprecates torch.distributed.nn.functional.all_gather; Lightning 2.6 all_gather uses it
    (
        r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
        FutureWarning,
        r"lightning_fabric\.utilities\.distributed",
    ),
    (
        r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
        FutureWarning,
        r"lightning\.fabric\.utilities\.distributed",
    ),
)


class DropLightningNoise(logging.Filter):
    """Drops log records whose message matches one of :data:`LIGHTNING_INFO_NOISE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(p.search(message) for p in LIGHTNING_INFO_NOISE)


def quiet_third_party_console() -> None:
    """Install the log filter and the scoped warning filters (idempotent)."""
    for name in LIGHTNING_INFO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropLightningNoise) for f in logger.filters):
            logger.addFilter(DropLightningNoise())
    for message, category, module in THIRD_PARTY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
