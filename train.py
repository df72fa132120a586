"""Train a valence (SER) head and measure bias propagation: ``python train.py [overrides]``.

Examples: ``python train.py`` (offline demo), ``python train.py upstream=hubert_xl lr=1e-4 ser_data=mess``,
``python train.py -m upstream=glob(*) lr=1e-3,1e-4,1e-5 ser_data=mess``.
Thin Hydra entry point like evaluate.py: compose ``conf/train.yaml``, run its task
(:mod:`speechbias.tasks.train_ser`), which writes results into the run's output folder.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from speechbias.launch.config_checks import check_command_line
from speechbias.launch.entry import register_project_root, run_entry
from speechbias.launch.help_text import register_help_resolver

# paths.root_dir defaults to this folder, whatever the working directory (PROJECT_ROOT or
# paths.root_dir=... override it)
register_project_root(Path(__file__).resolve().parent)
register_help_resolver(Path(__file__).resolve().parent / "conf")  # --help


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> dict | None:
    return run_entry(cfg)


if __name__ == "__main__":
    # an unknown option (upstream=..., bias_test=..., aggregation=...): one line naming the close matches
    check_command_line(Path(__file__).resolve().parent / "conf")
    main()
