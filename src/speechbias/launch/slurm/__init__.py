"""SLURM: what a job's process is (tasks, ranks), what a cluster offers, and how a sweep's jobs are doing.

Used by the SLURM launcher (``hydra_plugins/speechbias_launcher``, ``hydra/launcher=slurm``) on the
submitting side and by :mod:`speechbias.launch.entry` inside the jobs. Imports nothing heavy.
"""
