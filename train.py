"""Train a valence (SER) head and measure bias propagation: ``python train.py [overrides]``.

Examples: ``python train.py`` (offline demo), ``python train.py upstream=hubert_xl lr=1e-4 ser_data=mess``,
``python train.py -m upstream=glob(*) lr=1e-3,1e-4,1e-5 ser_data=mess``.
Thin Hydra entry point like evaluate.py: compose ``conf/train.yaml``, run its task
(:mod:`speechbias.tasks.train_ser`), which writes results into the run's output folder.
"""

# no `from __future__` import: it runs an import before the try below, outside its reach
try:
    from speechbias.launch.signals import install_stop_handlers

    install_stop_handlers()  # first: SIGTERM/SIGINT end the command with one line and exit 128 + signal
except KeyboardInterrupt:  # Ctrl-C during that import, before the handlers: the same one line
    from speechbias.launch.signals import stopped_before_handlers

    stopped_before_handlers()

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from speechbias.launch.entry import run_entry, run_script  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> dict | None:
    return run_entry(cfg)


if __name__ == "__main__":
    run_script(main, __file__)
