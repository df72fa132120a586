"""speechbias's SLURM launcher for Hydra (``hydra/launcher=slurm``); Hydra finds launchers in ``hydra_plugins``."""
