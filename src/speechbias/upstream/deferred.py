"""An upstream built from its config only when a run needs it: a run whose clips are all cached builds none.

``conf/task/speat.yaml`` hands its task a :class:`DeferredUpstream` of the run's ``upstream`` config
(``_recursive_: false``, so Hydra passes the config, not a built model). The task asks it for the fingerprint
(the feature-cache namespace) and the run's identity columns; it builds the upstream
(``hydra.utils.instantiate``) only for extraction. A weight-free baseline's fingerprint follows from its config
(the parameters its class is built from, :mod:`speechbias.upstream.classical_fingerprint`), a Hugging Face
upstream's from its config and its files (:mod:`speechbias.upstream.hf_identity`, as the class computes it; a
hub id must be in the local cache) (:data:`CONFIG_IDENTITIES`), so a warm fbank, mfcc or HF run imports no
torch. Any other upstream (s3prl, or an HF one whose files are not at hand) is built at the first such question
(an ``HFUpstream`` reads its config then, and its weights only at the first forward). The built upstream's
fingerprint must equal the one given before (checked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from speechbias.model_loading import FingerprintedModel
from speechbias.upstream.classical_fingerprint import FAMILY as CLASSICAL
from speechbias.upstream.classical_fingerprint import FbankConfig, MfccConfig
from speechbias.upstream.hf_identity import hf_fingerprint_fields, hf_upstream_name

if TYPE_CHECKING:
    from speechbias.upstream.base import Upstream


@dataclass(frozen=True)
class UpstreamIdentity:
    """What an upstream says of itself: ``fields`` (``fingerprint_fields()``), ``name``, ``display_name``
    and ``family``."""

    fields: dict
    name: str
    display_name: str | None
    family: str


def _classical(config_class: type[FbankConfig]) -> Callable[..., UpstreamIdentity]:
    def identity(**arguments) -> UpstreamIdentity:
        c = config_class(**arguments)  # the constructor's own parameters and checks
        return UpstreamIdentity(c.fingerprint_fields(), c.display_name or c.class_name, c.display_name, CLASSICAL)

    return identity


def _hf(**arguments) -> UpstreamIdentity | None:
    fields = hf_fingerprint_fields(**arguments)
    if fields is None:
        return None
    display_name = arguments.get("display_name")
    name = hf_upstream_name(display_name, arguments.get("model_id"), fields["family"])
    return UpstreamIdentity(fields, name, display_name, fields["family"])


def _hf_from_config_dict(model_type=None, config=None, seed=0, randomize=True, **arguments):
    """:func:`_hf` of ``HFUpstream.from_config_dict``'s arguments (its defaults)."""
    return _hf(model_type=model_type, config=dict(config or {}), seed=seed, randomize=randomize, **arguments)


# the weight-free baselines' identities (fbank, mfcc): from the config alone
_WEIGHT_FREE_IDENTITIES: dict[str, Callable[..., UpstreamIdentity]] = {
    "speechbias.upstream.classical.FbankUpstream": _classical(FbankConfig),
    "speechbias.upstream.classical.MfccUpstream": _classical(MfccConfig),
}
#: the targets without weights (fbank, mfcc)
WEIGHT_FREE_TARGETS = frozenset(_WEIGHT_FREE_IDENTITIES)
# ``_target_`` of an upstream config -> its identity from the config's arguments (None: only a build knows
# it); each takes the class's constructor arguments and raises what the constructor raises
CONFIG_IDENTITIES: dict[str, Callable[..., UpstreamIdentity | None]] = {
    **_WEIGHT_FREE_IDENTITIES,
    "speechbias.upstream.hf.HFUpstream": _hf,
    "speechbias.upstream.hf.HFUpstream.from_config_dict": _hf_from_config_dict,
}


class DeferredUpstream(FingerprintedModel):
    """The upstream of ``config`` (an upstream config node with ``_target_``), built on first need.

    Answers what the task asks before extraction (:meth:`fingerprint_fields`, :attr:`fingerprint`,
    :attr:`display_name`, :attr:`family`, :attr:`name`) from the config when :data:`CONFIG_IDENTITIES`
    knows its target and can tell, else from the built upstream; :meth:`build` returns the upstream itself.
    """

    def __init__(self, config: Mapping):
        target = config.get("_target_") if isinstance(config, (Mapping, DictConfig)) else None
        if not isinstance(target, str):
            raise ValueError(f"an upstream config needs a _target_ (the upstream's class), got {config!r}")
        self.config = config
        self.target = target
        self._upstream: Upstream | None = None
        self._known: UpstreamIdentity | None = None  # the identity given before the build

    def __repr__(self) -> str:
        return f"DeferredUpstream({self.target}, built={self._upstream is not None})"

    def _arguments(self) -> dict:
        """The constructor arguments of the config (its keys but ``_target_`` and Hydra's others)."""
        config = self.config
        plain = OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else dict(config)
        return {k: v for k, v in plain.items() if not (k.startswith("_") and k.endswith("_"))}

    def _identity_before_build(self) -> UpstreamIdentity | None:
        """The identity from the config (:data:`CONFIG_IDENTITIES`), or None when only the built upstream
        knows it (or the config has arguments the build refuses: it says why)."""
        if self._known is None and self.target in CONFIG_IDENTITIES:
            try:
                self._known = CONFIG_IDENTITIES[self.target](**self._arguments())
            except (TypeError, ValueError):
                return None
        return self._known

    def build(self) -> Upstream:
        """The upstream (built once; its fingerprint must be the one given before the build)."""
        if self._upstream is None:
            from hydra.utils import instantiate

            upstream = instantiate(self.config)
            fields = upstream.fingerprint_fields()
            if self._known is not None and fields != self._known.fields:
                keys = fields.keys() | self._known.fields.keys()
                changed = sorted(k for k in keys if fields.get(k) != self._known.fields.get(k))
                raise RuntimeError(
                    f"{upstream.name}: the built upstream's fingerprint differs from the one its config gave "
                    f"before the build ({', '.join(changed)}): its files changed during the run; rerun the command"
                )
            self._upstream = upstream
        return self._upstream

    def fingerprint_without_build(self) -> str | None:
        """The fingerprint when the config gives it, else None (nothing is built)."""
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
