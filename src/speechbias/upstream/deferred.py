"""An upstream built from its config only when a run needs it: a run whose clips are all cached builds none.

``conf/task/speat.yaml`` hands its task a :class:`DeferredUpstream` of the run's ``upstream`` config
(``_recursive_: false``, so Hydra passes the config, not a built model). The task asks it for the
fingerprint (the feature-cache namespace) and the run's identity columns; it builds the upstream
(``hydra.utils.instantiate``) only for extraction. A weight-free baseline's fingerprint follows from its
config (:data:`CONFIG_FINGERPRINTS`), so a warm fbank/mfcc run imports no torch; any other upstream is
built at the first such question (an ``HFUpstream`` reads its config then, and its weights only at the
first forward). The built upstream's fingerprint must equal the one given before (checked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from speechbias.model_loading import FingerprintedModel
from speechbias.upstream.classical_fingerprint import FAMILY as CLASSICAL
from speechbias.upstream.classical_fingerprint import fbank_config_fingerprint, mfcc_config_fingerprint

if TYPE_CHECKING:
    from speechbias.upstream.base import Upstream

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
    knows its target, else from the built upstream; :meth:`build` returns the upstream itself.
    """

    def __init__(self, config: Mapping):
        target = config.get("_target_") if isinstance(config, (Mapping, DictConfig)) else None
        if not isinstance(target, str):
            raise ValueError(f"an upstream config needs a _target_ (the upstream's class), got {config!r}")
        self.config = config
        self.target = target
        self._upstream: Upstream | None = None
        self._config_fields: dict | None = None

    def __repr__(self) -> str:
        return f"DeferredUpstream({self.target}, built={self._upstream is not None})"

    def _arguments(self) -> dict:
        """The constructor arguments of the config (its keys but ``_target_`` and Hydra's others)."""
        config = self.config
        plain = OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else dict(config)
        return {k: v for k, v in plain.items() if not (k.startswith("_") and k.endswith("_"))}

    def _fields_from_config(self) -> dict | None:
        """The fingerprint fields from the config alone, or None when only the built upstream knows them
        (a target not in :data:`CONFIG_FINGERPRINTS`, or arguments it refuses: the build says why)."""
        if self._config_fields is None and self.target in CONFIG_FINGERPRINTS:
            fields_of, _ = CONFIG_FINGERPRINTS[self.target]
            try:
                self._config_fields = fields_of(**self._arguments())
            except (TypeError, ValueError):
                return None
        return self._config_fields

    def build(self) -> Upstream:
        """The upstream (built once; its fingerprint must be the one given from the config)."""
        if self._upstream is None:
            from hydra.utils import instantiate

            upstream = instantiate(self.config)
            if self._config_fields is not None and upstream.fingerprint_fields() != self._config_fields:
                raise RuntimeError(
                    f"{self.target}: the built upstream's fingerprint fields "
                    f"{upstream.fingerprint_fields()} differ from those of its config "
                    f"{self._config_fields} (CONFIG_FINGERPRINTS is out of date)"
                )
            self._upstream = upstream
        return self._upstream

    def fingerprint_fields(self) -> dict:
        """What determines the upstream's outputs (see ``Upstream.fingerprint_fields``)."""
        if self._upstream is None:
            fields = self._fields_from_config()
            if fields is not None:
                return dict(fields)
        return self.build().fingerprint_fields()

    @property
    def display_name(self) -> str | None:
        if self._upstream is None and self._fields_from_config() is not None:
            return self._arguments().get("display_name")
        return getattr(self.build(), "display_name", None)

    @property
    def family(self) -> str:
        if self._upstream is None and self._fields_from_config() is not None:
            return CONFIG_FINGERPRINTS[self.target][1]
        return self.build().family

    @property
    def name(self) -> str:
        if self._upstream is None and self._fields_from_config() is not None:
            return self.display_name or self.target.rsplit(".", 1)[-1]
        return self.build().name


def built_upstream(upstream: Upstream | DeferredUpstream) -> Upstream:
    """The upstream itself: built now when ``upstream`` is deferred."""
    return upstream.build() if isinstance(upstream, DeferredUpstream) else upstream
