"""What a SpEAT run computes and writes, with or without the extraction loop: its settings (settings.py:
``speat.*``) and its statistics and files (results.py: :class:`~speechbias.speat.results.SpeatResults`, used by
the extraction loop's callback and by a warm run's task alike; torch-free), its optional statistics one entry
each of optional_statistics.py's ``OPTIONAL_STATISTICS``."""
