"""Evaluate bias: ``python evaluate.py [task=speat|report|wer_disparity|spoken_stereoset] [overrides]``.

Thin Hydra entry point: compose the config, instantiate the task's runner, run it. The runner
writes results.csv/json and report.md into the run's output folder and logs to W&B.
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


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict | None:
    return run_entry(cfg)


if __name__ == "__main__":
    run_script(main, __file__)
