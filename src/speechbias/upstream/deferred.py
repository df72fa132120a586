"""An upstream built from its config only when a run needs it: a run whose clips are all cached builds none.

``conf/task/speat.yaml`` hands its task a :class:`DeferredUpstream` of the run's ``upstream`` config
(``_recursive_: false``, so Hydra passes the config, not a built model) and the feature cache folder. The
task asks it for the fingerprint (the feature-cache namespace) and the run's identity columns; it builds
the upstream (``hydra.utils.instantiate``) only for extraction. A weight-free baseline's fingerprint
follows from its config (:data:`CONFIG_FINGERPRINTS`); a Hugging Face upstream's from the record its last
build left for the same inputs (:mod:`speechbias.upstream.fingerprint_records`), so a warm fbank, mfcc or
HF run imports no torch. Any other upstream (or an HF one without a record) is built at the first such
question (an ``HFUpstream`` reads its config then, and its weights only at the first forward), and an HF
build leaves its record. The built upstream's fingerprint must equal the one given before (checked).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from speechbias.model_loading import FingerprintedModel
from speechbias.upstream.classical_fingerprint import FAMILY as CLASSICAL
from speechbias.upstream.classical_fingerprint import fbank_config_fingerprint, mfcc_config_fingerprint
from speechbias.upstream.fingerprint_records import FingerprintRecords, RecordedIdentity, record_inputs

if TYPE_CHECKING:
    from speechbias.upstream.base import Upstream

log = logging.getLogger(__name__)

# ``_target_`` of an upstream config -> (its fingerprint fields from the config's arguments, its family);
# the function takes the class's constructor arguments and raises what the constructor raises
CONFIG_FINGERPRINTS: dict[str, tuple[Callable[..., dict], str]] = {
    "speechbias.upstream.classical.FbankUpstream": (fbank_config_fingerprint, CLASSICAL),
    "speechbias.upstream.classical.MfccUpstream": (mfcc_config_fingerprint, CLASSICAL),
}


class DeferredUpstream(FingerprintedModel):
    """The upstream of ``config`` (an upstream config node with ``_target_``), built on first need.

    Answers what the task asks before extraction (:meth:`fingerprint_fields`, :attr:`fingerprint`,
    :attr:`display_name`, :attr:`family`, :attr:`name`) from the config when :data:`CONFIG_FINGERPRINTS`
    knows its target, from a fingerprint record under ``feature_cache_dir`` (the feature cache folder; None: no
    records) when one matches, else from the built upstream; :meth:`build` returns the upstream itself.
    """

    def __init__(self, config: Mapping, feature_cache_dir: str | None = None):
        target = config.get("_target_") if isinstance(config, (Mapping, DictConfig)) else None
        if not isinstance(target, str):
            raise ValueError(f"an upstream config needs a _target_ (the upstream's class), got {config!r}")
        self.config = config
        self.target = target
        self.records = FingerprintRecords(feature_cache_dir) if feature_cache_dir else None
        self._upstream: Upstream | None = None
        self._known: RecordedIdentity | None = None  # the identity given before the build
        self._known_from: str | None = None  # "config" or the record's path
        self._record_inputs: dict | None = None

    def __repr__(self) -> str:
        return f"DeferredUpstream({self.target}, built={self._upstream is not None})"

    def _plain_config(self) -> dict:
        config = self.config
        return OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else dict(config)

    def _arguments(self) -> dict:
        """The constructor arguments of the config (its keys but ``_target_`` and Hydra's others)."""
        return {k: v for k, v in self._plain_config().items() if not (k.startswith("_") and k.endswith("_"))}

    def _identity_before_build(self) -> RecordedIdentity | None:
        """The identity from the config (:data:`CONFIG_FINGERPRINTS`) or a matching record, or None when
        only the built upstream knows it (or the config has arguments the build refuses: it says why)."""
        if self._known is not None:
            return self._known
        if self.target in CONFIG_FINGERPRINTS:
            fields_of, family = CONFIG_FINGERPRINTS[self.target]
            arguments = self._arguments()
            try:
                fields = fields_of(**arguments)
            except (TypeError, ValueError):
                return None
            display_name = arguments.get("display_name")
            name = display_name or self.target.rsplit(".", 1)[-1]
            self._known, self._known_from = RecordedIdentity(fields, name, display_name, family), "config"
        elif self.records is not None:
            self._record_inputs = record_inputs(self._plain_config())
            found = self.records.lookup(self._record_inputs) if self._record_inputs is not None else None
            if found is not None:
                self._known, self._known_from = found, str(self.records.path(self._record_inputs))
        return self._known

    def build(self) -> Upstream:
        """The upstream (built once; its fingerprint must be the one given before the build), recorded
        for the next run when its target is one :mod:`~speechbias.upstream.fingerprint_records` records."""
        if self._upstream is None:
            from hydra.utils import instantiate

            upstream = instantiate(self.config)
            built = RecordedIdentity(
                upstream.fingerprint_fields(), upstream.name, getattr(upstream, "display_name", None), upstream.family
            )
            if self._known is not None and built.fields != self._known.fields:
                if self._known_from == "config":
                    raise RuntimeError(
                        f"{self.target}: the built upstream's fingerprint fields {built.fields} differ from "
                        f"those of its config {self._known.fields} (CONFIG_FINGERPRINTS is out of date)"
                    )
                self.records.forget(self._record_inputs)
                keys = built.fields.keys() | self._known.fields.keys()
                changed = sorted(k for k in keys if built.fields.get(k) != self._known.fields.get(k))
                raise RuntimeError(
                    f"{upstream.name}: the fingerprint record {self._known_from} differs from the built upstream "
                    f"({', '.join(changed)}); the record is removed: rerun the command"
                )
            if self.records is not None and self._known is None:
                inputs = record_inputs(self._plain_config())  # now: a build may have filled the hub cache
                try:
                    if inputs is not None:
                        self.records.remember(inputs, built)
                except OSError as exc:  # a read-only or full cache: the next run builds again, nothing is lost
                    log.info("fingerprint of %s not recorded (%s)", upstream.name, exc)
            self._upstream = upstream
        return self._upstream

    def fingerprint_without_build(self) -> str | None:
        """The fingerprint when the config or a record gives it, else None (nothing is built)."""
        if self._upstream is None and self._identity_before_build() is None:
            return None
        return self.fingerprint

    def fingerprint_fields(self) -> dict:
        """What determines the upstream's outputs (see ``Upstream.fingerprint_fields``)."""
        if self._upstream is None and self._identity_before_build() is not None:
            return dict(self._known.fields)
        return self.build().fingerprint_fields()

    @property
    def display_name(self) -> str | None:
        if self._upstream is None and self._identity_before_build() is not None:
            return self._known.display_name
        return getattr(self.build(), "display_name", None)

    @property
    def family(self) -> str:
        if self._upstream is None and self._identity_before_build() is not None:
            return self._known.family
        return self.build().family

    @property
    def name(self) -> str:
        if self._upstream is None and self._identity_before_build() is not None:
            return self._known.name
        return self.build().name


def built_upstream(upstream: Upstream | DeferredUpstream) -> Upstream:
    """The upstream itself: built now when ``upstream`` is deferred."""
    return upstream.build() if isinstance(upstream, DeferredUpstream) else upstream
