"""Task runners: ``run(cfg, output_dir) -> dict`` for each thing evaluate.py / train.py can do."""
