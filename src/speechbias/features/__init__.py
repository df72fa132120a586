"""Per-layer temporal statistics of upstream states: computation, cache, and extraction."""
