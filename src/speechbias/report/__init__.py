"""Results tables, figures, W&B logging and the local report.md of a run."""
