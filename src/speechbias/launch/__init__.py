"""What runs a command, a job and a sweep: the entry points' shared body (entry), the checks made before
any model loads (config_checks, user_errors), the Hydra resolvers and config options registered before
composing (run_context, project_paths, aggregation_configs, bias_test_configs), the skip-if-finished
check (run_markers), job and sweep status (sweep_status), the sweep's pre-flight (sweep_preflight),
loky workers that end with their sweep (parent_watch), the Lightning Trainer factory
(lightning_trainer) and SLURM (slurm/)."""
