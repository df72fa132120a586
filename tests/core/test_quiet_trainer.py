"""The trainer factory of conf/trainer: Lightning's tips and known third-party noise gone, the rest kept."""

from __future__ import annotations

import logging
import warnings

from omegaconf import OmegaConf

from speechbias.launch.lightning_trainer import build_trainer, quiet_third_party_console
from conftest import CONF_DIR

LEAFSPEC = (
    "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and "
    "treespec.is_leaf()` instead."
)


def test_every_trainer_config_uses_the_factory():
    for path in sorted((CONF_DIR / "trainer").glob("*.yaml")):
        assert OmegaConf.load(path)["_target_"] == "speechbias.launch.lightning_trainer.build_trainer", path.name


def test_no_tip_and_no_absent_accelerator_lines_but_other_lightning_info_stays(caplog):
    caplog.set_level(logging.INFO)
    build_trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False)
    lightning = [r.getMessage() for r in caplog.records if r.name.endswith("utilities.rank_zero")]
    assert not [
        m
        for m in lightning
        if "Tip" in m or "litlogger" in m or "TPU available" in m or m == "GPU available: False, used: False"
    ], lightning
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    with caplog.at_level(logging.INFO):
        rank_zero.info("`Trainer.fit` stopped: `max_steps=8` reached.")
        rank_zero.info("GPU available: True (cuda), used: True")
    kept = [r.getMessage() for r in caplog.records]
    assert "`Trainer.fit` stopped: `max_steps=8` reached." in kept and "GPU available: True (cuda), used: True" in kept


def _emit(message: str, category, module: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        quiet_third_party_console()
        warnings.warn_explicit(
            message, category, filename=f"/x/{module.replace('.', '/')}.py", lineno=21, module=module
        )
    return [str(w.message) for w in caught]


def test_the_leafspec_deprecation_is_dropped_only_where_lightning_triggers_it():
    assert _emit(LEAFSPEC, FutureWarning, "pytorch_lightning.utilities._pytree") == []
    # the same message from our own code, another FutureWarning, or a UserWarning still shows
    assert _emit(LEAFSPEC, FutureWarning, "speechbias.features.extraction") == [LEAFSPEC]
    assert _emit("something else is deprecated", FutureWarning, "pytorch_lightning.utilities._pytree") == [
        "something else is deprecated"
    ]
    assert _emit("clip too short", UserWarning, "speechbias.fileio.audio") == ["clip too short"]
