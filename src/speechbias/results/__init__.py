"""Reading results that were written earlier: a sweep's run folders (sweep_results, the input of
task=report) and the SpEAT paper's published results table (paper_results)."""
