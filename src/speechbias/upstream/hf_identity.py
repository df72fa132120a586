"""What determines a Hugging Face upstream's outputs, read from its arguments and files: no torch, no build.

An :class:`~speechbias.upstream.hf.HFUpstream`'s fingerprint (the feature cache namespace) is
:func:`hf_fingerprint_fields` of its constructor arguments, so a run whose clips are all cached asks it of
the config (:class:`~speechbias.upstream.deferred.DeferredUpstream`) and builds nothing. The fields are
what determines the outputs, not what a build derives from it:

- the arguments that change outputs: model id, revision, the requested family and ``normalize``, dtype,
  ``randomize`` and seed, an inline ``model_type`` + ``config`` (``display_name`` and ``cache_dir`` do not);
- the model's files: for a hub id, the commit the local Hugging Face cache resolves the revision to
  (loading is cache-first; a commit fixes every file's content); for a local folder, each regular file's
  name, size, mtime_ns and ctime_ns: a file written again (even with its size kept and its mtime set
  back) gets a new ctime, which no user call sets back (the audio index's rule, ``fileio/audio_index.py``);
  hashing the weights instead would cost ~0.75 CPU-s per GiB (sha256) at every warm run;
- the installed transformers version (its config classes fill in defaults and it runs the model);
- the code's conventions: layer convention, random init method, Whisper's frame trim.

The family is read from ``config.json``'s ``model_type``. Import-light: standard library and
huggingface_hub (through :mod:`speechbias.model_loading`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from speechbias.model_loading import cached_snapshot, local_dir, sha256_json

#: the layer convention of every HF family (:mod:`speechbias.upstream.block_states`)
LAYER_CONVENTION = "block-io-v1"
#: the random init of an HF random control (:mod:`speechbias.upstream.randomize`)
HF_RANDOM_INIT = "transformers-init+parametrized-v1"
#: which Whisper encoder frames are kept (:mod:`speechbias.upstream.whisper_frontend`)
FRAME_TRIM = "speechbias-whisper-trim-v1: mel=ceil(n/160), encoder=(mel-1)//2+1"
#: the config.json model types HFUpstream supports (the keys of ``families.FAMILIES``; tested)
MODEL_TYPES = ("wav2vec2", "hubert", "wavlm", "whisper")


def transformers_version() -> str | None:
    """The installed transformers version (package metadata: nothing imported)."""
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def local_files(folder: Path) -> list[list]:
    """[name, size, mtime_ns, ctime_ns] of each regular file of a local model folder, in name order."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            st = path.stat()
            rows.append([path.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    return rows


def _model_type(config_json: Path) -> str | None:
    try:
        return json.loads(config_json.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def hf_fingerprint_fields(
    model_id: str | None = None,
    revision: str | None = None,
    family: str | None = None,
    randomize: bool = False,
    seed: int = 0,
    dtype: str = "float32",
    normalize: bool | None = None,
    layer_convention: str = LAYER_CONVENTION,
    display_name: str | None = None,
    cache_dir: str | None = None,
    *,
    model_type: str | None = None,
    config: Mapping | None = None,
) -> dict | None:
    """The fingerprint fields of ``HFUpstream(**arguments)`` (same defaults), or None when they cannot be
    known without a build: a hub id not in the local cache, a missing folder, an unreadable config.json,
    a model type or family the build refuses (the build then says why, or downloads)."""
    files: dict = {"resolved_commit": None, "local_files": None, "config_sha256": None}
    if model_id is None:
        if config is None or not randomize:
            return None
        detected = model_type
        files["config_sha256"] = sha256_json({"model_type": model_type, "config": dict(config)})
    elif not isinstance(model_id, str) or not model_id or config is not None:
        return None
    else:
        try:
            folder = local_dir(model_id)  # MissingWeightsError (an OSError) for a missing one
            snapshot = cached_snapshot(model_id, revision, cache_dir) if folder is None else None
            if folder is not None:
                files["local_files"] = local_files(folder)
        except (OSError, ValueError):  # a missing or unreadable folder, an id no path can hold
            return None
        if folder is None and snapshot is None:
            return None
        if snapshot is not None:
            files["resolved_commit"] = snapshot.name
        detected = _model_type((folder if folder is not None else snapshot) / "config.json")
    if (
        detected not in MODEL_TYPES
        or (family is not None and family != detected)
        or layer_convention != LAYER_CONVENTION
    ):
        return None
    return {
        "upstream": "hf",
        "model_id": model_id,
        "revision": revision,
        **files,
        "family": detected,
        "layer_convention": LAYER_CONVENTION,
        "dtype": dtype,
        "transformers": transformers_version(),
        "randomize": bool(randomize),
        "seed": int(seed) if randomize else None,
        **({"random_init": HF_RANDOM_INIT} if randomize else {}),
        "normalize": normalize,
        **({"whisper_frames": FRAME_TRIM} if detected == "whisper" else {}),
        # half-precision states on CPU are computed without oneDNN (hf.half_precision_cpu_guard)
        **({"cpu_half_kernels": "aten"} if dtype != "float32" else {}),
    }


def hf_upstream_name(display_name: str | None, model_id: str | None, family: str) -> str:
    """The name an HF upstream shows: its display name, else its model id, else ``random-<family>``."""
    return display_name or model_id or f"random-{family}"
