"""What runs a command, a job and a sweep (the top floor: nothing else in the package imports it): the entry
points' shared body (entry), the checks made before any model loads (config_checks: the shared ones, then the
task's own), the aggregation config options registered before composing (aggregation_configs), job and sweep
status (sweep_status), the sweep's pre-flight (sweep_preflight), loky workers that end with their sweep
(parent_watch), the Lightning Trainer factory (lightning_trainer) and SLURM (slurm/)."""
