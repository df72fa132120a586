"""The SpEAT paper's stimulus selection and matching procedures -> manifests with pair_id and stratum.

Entry point: :func:`build_test` (the builder named by ``conf/bias_test/*.yaml``), which takes each
test's procedures from :mod:`speechbias.stimuli.registry`. Modules: ``matching`` (seeded
primitives), ``propensity`` (propensity-score matching and balance), ``targets`` and ``attributes``
(the paper's procedures), ``diagnostics`` (sidecar report statistics), ``segments`` (cut interview
segments to files), ``sources`` (corpus folders under data_root), ``build`` (putting it together).
"""

from speechbias.stimuli.selection.build import build_test
from speechbias.stimuli.selection.matching import SelectionError

__all__ = ["SelectionError", "build_test"]
