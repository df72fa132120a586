"""Evaluate bias: ``python evaluate.py [task=speat|report|wer_disparity|spoken_stereoset] [overrides]``.

Thin Hydra entry point: compose the config, instantiate the task's runner, run it. The runner
writes results.csv/json and report.md into the run's output folder and logs to W&B.
"""

# no `from __future__` import: it runs an import before the try below, outside its reach
try:
    from speechbias.launch.signals import ends_on_signals, install_stop_handlers

    install_stop_handlers()  # first: SIGTERM/SIGINT end the command with one line and exit 128 + signal
except KeyboardInterrupt:  # Ctrl-C during that import, before the handlers: the same one line
    from speechbias.launch.signals import stopped_before_handlers

    stopped_before_handlers()

from pathlib import Path  # noqa: E402

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from speechbias.launch.config_checks import check_command_line  # noqa: E402
from speechbias.launch.entry import register_project_root, run_entry  # noqa: E402
from speechbias.launch.help_text import register_help_resolver  # noqa: E402

# paths.root_dir defaults to this folder, whatever the working directory (PROJECT_ROOT or
# paths.root_dir=... override it)
register_project_root(Path(__file__).resolve().parent)
register_help_resolver(Path(__file__).resolve().parent / "conf")  # --help


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict | None:
    return run_entry(cfg)


if __name__ == "__main__":
    with ends_on_signals():  # a stop signal: one line (a sweep's table first), exit 128 + signal
        # an unknown option (upstream=..., bias_test=..., aggregation=...): one line naming the close matches
        check_command_line(Path(__file__).resolve().parent / "conf", config_name="evaluate")
        main()
