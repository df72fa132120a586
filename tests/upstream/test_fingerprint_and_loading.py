"""Fingerprints (the feature-cache namespace) and the missing-weights error, offline."""

from __future__ import annotations

import json
import time

import pytest

from speechbias.model_loading import MissingWeightsError
from speechbias.upstream.hf import HFUpstream
from upstream.tiny_models import build_tiny, tiny_config


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_wav2vec2")
    build_tiny("wav2vec2", stable=True, seed=0).model.save_pretrained(path)
    return path


def test_fingerprint_is_stable_json_and_names_what_made_the_states():
    a, b = build_tiny("wavlm", seed=0), build_tiny("wavlm", seed=0)
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 32
    fields = a.fingerprint_fields()
    json.dumps(fields)  # JSON-serialisable as is
    assert fields["family"] == "wavlm" and fields["layer_convention"] == "block-io-v1"
    assert fields["randomize"] is True and fields["seed"] == 0 and fields["dtype"] == "float32"
    assert fields["transformers"]
    assert build_tiny("wavlm", seed=0, display_name="renamed").fingerprint == a.fingerprint


def test_fingerprint_changes_with_what_changes_the_states(saved_tiny):
    base = build_tiny("hubert", seed=0)
    assert build_tiny("hubert", seed=1).fingerprint != base.fingerprint
    assert build_tiny("hubert", seed=0, dtype="bfloat16").fingerprint != base.fingerprint
    assert build_tiny("hubert", seed=0, normalize=True).fingerprint != base.fingerprint
    wider = HFUpstream.from_config_dict("hubert", {**tiny_config("hubert"), "intermediate_size": 48})
    assert wider.fingerprint != base.fingerprint
    loaded = HFUpstream(model_id=str(saved_tiny))
    assert loaded.fingerprint == HFUpstream(model_id=str(saved_tiny)).fingerprint
    assert HFUpstream(model_id=str(saved_tiny), revision="v2").fingerprint != loaded.fingerprint
    randomized = HFUpstream(model_id=str(saved_tiny), randomize=True, seed=0)
    assert randomized.fingerprint != loaded.fingerprint
    assert HFUpstream(model_id=str(saved_tiny), randomize=True, seed=1).fingerprint != randomized.fingerprint
    assert loaded.fingerprint_fields()["local_files"], "local weights enter the fingerprint"


def test_randomize_reinitialises_a_pretrained_architecture(saved_tiny):
    import torch

    loaded = HFUpstream(model_id=str(saved_tiny))
    randomized = HFUpstream(model_id=str(saved_tiny), randomize=True, seed=5)
    p = dict(loaded.model.named_parameters())
    q = dict(randomized.model.named_parameters())
    assert p.keys() == q.keys()
    assert any(not torch.equal(p[k], q[k]) for k in p if "encoder.layers" in k)


@pytest.mark.parametrize("randomize", [False, True])
def test_missing_weights_fail_fast_with_one_clear_line(offline, tmp_path, randomize):
    start = time.monotonic()
    with pytest.raises(MissingWeightsError) as caught:
        HFUpstream(model_id="facebook/wav2vec2-base", cache_dir=str(tmp_path / "empty_cache"), randomize=randomize)
    elapsed = time.monotonic() - start
    message = str(caught.value)
    assert elapsed < 5.0, f"took {elapsed:.1f} s"
    assert "\n" not in message
    assert "'facebook/wav2vec2-base'" in message
    if randomize:  # a random control reads the architecture, never the weights: the line says so
        assert "`hf download facebook/wav2vec2-base config.json preprocessor_config.json`" in message
        assert "only config.json and preprocessor_config.json are needed (not the weights)" in message
    else:
        assert "`hf download facebook/wav2vec2-base`" in message
    assert "HF_HOME" in message and "local directory" in message
    assert "offline (HF_HUB_OFFLINE=1)" in message


def test_config_without_weights_names_the_weights(tmp_path):
    build_tiny("wav2vec2").config.save_pretrained(tmp_path)  # config.json only
    with pytest.raises(MissingWeightsError, match="cannot load the weights of model"):
        HFUpstream(model_id=str(tmp_path))


def test_a_missing_local_directory_is_named():
    with pytest.raises(MissingWeightsError, match=r"'\./no/such/model' looks like a local directory"):
        HFUpstream(model_id="./no/such/model")


def test_model_id_or_config_is_required():
    with pytest.raises(ValueError, match="upstream=hf model_id=<id>"):
        HFUpstream()


def test_unreachable_hub_fails_fast_without_offline_mode(monkeypatch, tmp_path):
    """Not in offline mode and not cached: one quick reachability probe instead of huggingface_hub's
    ~25 s of retries per file."""
    import huggingface_hub

    from speechbias import model_loading

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    probes = []
    monkeypatch.setattr(model_loading, "hub_reachable", lambda timeout_s=3.0: probes.append(1) or False)
    start = time.monotonic()
    with pytest.raises(MissingWeightsError, match="hub .* is unreachable") as caught:
        HFUpstream(model_id="microsoft/wavlm-large", cache_dir=str(tmp_path))
    assert time.monotonic() - start < 5.0
    assert probes == [1]
    assert "'microsoft/wavlm-large' from the hub or the local cache" in str(caught.value)


def test_cached_files_load_without_touching_the_network(monkeypatch, saved_tiny):
    import huggingface_hub

    from speechbias import model_loading

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(model_loading, "hub_reachable", lambda timeout_s=3.0: pytest.fail("probed the network"))
    assert HFUpstream(model_id=str(saved_tiny)).family == "wav2vec2"


def test_the_fingerprint_type_wraps_the_fields_and_their_digest():
    import hashlib

    from speechbias.model_loading import ModelFingerprint

    up = build_tiny("whisper", seed=0)
    fingerprint = up.model_fingerprint
    assert isinstance(fingerprint, ModelFingerprint) and fingerprint.fields == up.fingerprint_fields()
    blob = json.dumps(up.fingerprint_fields(), sort_keys=True, default=str).encode()
    assert fingerprint.digest == up.fingerprint == hashlib.sha256(blob).hexdigest()[:32]
    assert fingerprint == ModelFingerprint(dict(up.fingerprint_fields()))
    assert len({fingerprint, up.model_fingerprint}) == 1  # hashable, by digest
    assert fingerprint.fields["whisper_frames"].startswith("speechbias-whisper-trim-v1")


def test_a_local_directory_transformers_cannot_read_is_a_missing_weights_error(tmp_path):
    with pytest.raises(MissingWeightsError, match=r"cannot load the config of model '.*'.*\[Unrecognized model"):
        HFUpstream(model_id=str(tmp_path))  # an empty directory: transformers raises ValueError


def test_the_download_command_the_message_names_exists():
    """The message says `hf download <id>`: the installed huggingface-hub's CLI has that command (it has no
    huggingface-cli any more)."""
    import subprocess
    import sys
    from pathlib import Path

    hf = Path(sys.executable).parent / "hf"
    if not hf.exists():
        pytest.skip("huggingface-hub's hf CLI is not installed beside this Python")
    proc = subprocess.run([str(hf), "download", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "repo_id" in proc.stdout.lower().replace("-", "_")


def test_check_weights_available_reads_the_cache_only(tmp_path, monkeypatch):
    """A lazy upstream's check: a cache snapshot with config.json and weights passes, config.json alone
    or nothing raises the loader's one-line MissingWeightsError (offline: no hub probe), a local folder passes."""
    from speechbias.model_loading import MissingWeightsError, check_weights_available

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hub"
    snapshot = cache / "models--org--tiny" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text("a" * 40)
    (snapshot / "config.json").write_text("{}")
    with pytest.raises(
        MissingWeightsError, match=r"weights of model 'org/tiny' at revision 'main'.*hf download org/tiny"
    ):
        check_weights_available("org/tiny", "main", cache_dir=str(cache))  # config only, no weights
    (snapshot / "model.safetensors").write_bytes(b"x")
    check_weights_available("org/tiny", "main", cache_dir=str(cache))
    with pytest.raises(MissingWeightsError, match="'org/other'"):
        check_weights_available("org/other", "main", cache_dir=str(cache))
    check_weights_available(str(snapshot))  # a local directory


def test_check_model_files_names_what_the_cache_or_the_folder_lacks(tmp_path, monkeypatch):
    """A run's check before torch: config.json and a weights file, each looked up in a cache snapshot laid out
    as huggingface_hub lays it out (refs/main -> snapshots/<commit>), or in a local folder; a random control
    (only_files) needs config.json alone. Offline, nothing is probed."""
    from speechbias.model_loading import RANDOM_CONTROL_FILES, MissingWeightsError, check_model_files

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hub"
    snapshot = cache / "models--org--tiny" / "snapshots" / ("b" * 40)
    snapshot.mkdir(parents=True)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text("b" * 40)

    def error(*args, **kwargs) -> str:
        with pytest.raises(MissingWeightsError) as caught:
            check_model_files(*args, cache_dir=str(cache), **kwargs)
        assert "\n" not in str(caught.value)
        return str(caught.value)

    both = error("org/tiny", "main")
    assert both.startswith("cannot load the config and weights of model 'org/tiny' at revision 'main' offline")
    assert "[no config.json and no weights file (model.safetensors / pytorch_model.bin) in the local cache]" in both
    random_control = error("org/tiny", "main", only_files=RANDOM_CONTROL_FILES)
    assert random_control.startswith("cannot load the config of model 'org/tiny'")
    assert "`hf download org/tiny config.json preprocessor_config.json`" in random_control
    (snapshot / "model.safetensors").write_bytes(b"x")
    assert error("org/tiny", "main").startswith("cannot load the config of model 'org/tiny'")
    (snapshot / "model.safetensors").unlink()
    (snapshot / "config.json").write_text("{}")
    assert error("org/tiny", "main").startswith("cannot load the weights of model 'org/tiny'")
    check_model_files("org/tiny", "main", cache_dir=str(cache), only_files=RANDOM_CONTROL_FILES)
    (snapshot / "model.safetensors.index.json").write_text("{}")  # sharded weights: their index
    check_model_files("org/tiny", "main", cache_dir=str(cache))
    assert "'org/tiny' at revision 'v2'" in error("org/tiny", "v2")  # another revision is not cached
    invalid = error("not a/valid id")  # huggingface_hub's validation of a hub id, in the line
    assert invalid.startswith("cannot load the config of model 'not a/valid id'") and "[Repo id must use" in invalid

    folder = tmp_path / "local"
    folder.mkdir()
    assert f"[no config.json and no weights file (model.safetensors / pytorch_model.bin) in {folder}]" in error(
        str(folder)
    )
    (folder / "config.json").write_text("{}")
    check_model_files(str(folder), only_files=RANDOM_CONTROL_FILES)
    assert f"no weights file (model.safetensors / pytorch_model.bin) in {folder}" in error(str(folder))
    (folder / "pytorch_model.bin").write_bytes(b"x")
    check_model_files(str(folder))
    assert "looks like a local directory but does not exist" in error(str(tmp_path / "gone"))


def test_check_model_files_online_probes_the_hub_once(monkeypatch, tmp_path):
    """Not offline and not cached: one reachability probe for config and weights together; an unreachable hub
    is the one line, a reachable one leaves the download to the load (the real hub id is kept)."""
    import huggingface_hub

    from speechbias import model_loading

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    probes, reachable = [], [False]
    monkeypatch.setattr(model_loading, "hub_reachable", lambda timeout_s=3.0: probes.append(1) or reachable[0])
    with pytest.raises(MissingWeightsError, match=r"config and weights of model 'microsoft/wavlm-large' from the hub"):
        model_loading.check_model_files("microsoft/wavlm-large", cache_dir=str(tmp_path))
    assert probes == [1]
    reachable[0] = True
    model_loading.check_model_files("microsoft/wavlm-large", cache_dir=str(tmp_path))
    assert probes == [1, 1]
