"""The auto clip-length limit (``extraction.max_clip_seconds=auto``): the peak model's formula derived here by
hand for one tiny config, the limit monotone in memory, model size and batch, Whisper's window, the sizes read
from the composed upstream configs, and the memory read from cgroup files."""

from __future__ import annotations

import math
import os

import pytest
from omegaconf import OmegaConf

from speechbias.errors import ConfigError
from speechbias.features import clip_memory
from speechbias.features.clip_memory import clip_limit, longest_clip_seconds
from speechbias.features.extraction_settings import ExtractionSettings
from speechbias.features.memory_size import cgroup_limit_bytes
from speechbias.upstream.architecture import LARGEST, architecture_of

GIB = 2**30


def upstream(conf_dir, name: str, **config):
    node = OmegaConf.load(conf_dir / "upstream" / f"{name}.yaml")
    for key, value in config.items():
        OmegaConf.update(node, f"config.{key}", value)
    return node


def run_config(conf_dir, name: str, memory_gib: float, batch: int = 1, **config):
    return OmegaConf.create(
        {
            "upstream": OmegaConf.to_container(upstream(conf_dir, name, **config)),
            "extraction": {"max_clip_seconds": "auto", "memory_gib": memory_gib, "batch_size": batch},
        }
    )


def test_the_limit_of_tiny_wav2vec2_is_the_documented_formula_worked_by_hand(conf_dir):
    # tiny_wav2vec2.yaml: 2 blocks, D = 32, 2 heads, ffn 64, conv_dim 16 x 7, strides 5,2,2,2,2,2,2, kernels
    # 10,3,3,3,3,2,2, 16 positional kernels in 4 groups, group-norm front end
    frames_per_s = 16_000 / (5 * 2**6)  # 50
    audio = 24 * 16_000  # AUDIO_BYTES_PER_SAMPLE per sample
    front = 2 * 16 * (16_000 / 5) * 4  # FRONT_COPIES x channels x samples / stride x float32
    states = (2 + 1) * frames_per_s * 32 * 4  # every hidden state kept
    block = frames_per_s * (4 * 32 + 64) * 4  # q, k, v, out and the feed-forward of one block
    per_second = 1.25 * (audio + front + states + block)  # MARGIN
    parameters = 2 * (4 * 32 * 32 + 2 * 32 * 64) + 32 * 32 * 16 // 4 + (16 * 10 + 16 * 16 * (4 * 3 + 2 * 2)) + 16 * 32
    for memory_gib, batch in ((4, 1), (6, 2), (2.5, 3)):
        budget = 0.5 * memory_gib * GIB - 768 * 2**20 - 4 * parameters  # half the memory less process and weights
        expected = math.floor(budget / batch / per_second)
        limit = clip_limit(run_config(conf_dir, "tiny_wav2vec2", memory_gib, batch))
        assert limit.seconds == expected
        assert limit.memory_bytes == int(memory_gib * GIB) and limit.batch == batch


def test_the_limit_grows_with_memory_and_shrinks_with_the_model_and_the_batch(conf_dir):
    memories = [1.5, 2, 3, 8, 24, 80, 640]
    for name in ("fbank", "tiny_wav2vec2", "tiny_wavlm", "wav2vec2_large", "hubert_xl", "wavlm_large"):
        arch = architecture_of(upstream(conf_dir, name))
        limits = [longest_clip_seconds(arch, gib * GIB) for gib in memories]
        assert limits == sorted(limits) and limits[-1] > limits[0], (name, limits)
        by_batch = [longest_clip_seconds(arch, 80 * GIB, batch) for batch in (1, 2, 8)]
        assert by_batch == sorted(by_batch, reverse=True) and by_batch[0] > by_batch[-1], (name, by_batch)
    # a wider, deeper or more-headed model of the same family takes shorter clips
    for family in ("tiny_wav2vec2", "tiny_wavlm"):
        sizes = [{}, {"hidden_size": 64}, {"hidden_size": 64, "num_hidden_layers": 4}]
        sizes.append({**sizes[-1], "num_attention_heads": 8, "conv_dim": [32] * 7})
        limits = [longest_clip_seconds(architecture_of(upstream(conf_dir, family, **s)), 4 * GIB) for s in sizes]
        assert limits == sorted(limits, reverse=True) and limits[0] > limits[-1], (family, limits)
    base, large, xl = (architecture_of(upstream(conf_dir, n)) for n in ("hubert_base", "hubert_large", "hubert_xl"))
    assert (
        longest_clip_seconds(base, 24 * GIB)
        > longest_clip_seconds(large, 24 * GIB)
        > longest_clip_seconds(xl, 24 * GIB)
    )


def test_wavlm_memory_grows_with_the_square_of_the_clip_and_the_others_linearly(conf_dir):
    for name, square in (("tiny_wavlm", True), ("tiny_wav2vec2", False), ("fbank", False)):
        arch = architecture_of(upstream(conf_dir, name))
        one, ten = clip_memory.clip_bytes(arch, 60), clip_memory.clip_bytes(arch, 600)
        assert (ten / one > 20) is square, (name, ten / one)


def test_whisper_takes_its_30_s_window_and_says_so(conf_dir):
    limit = clip_limit(run_config(conf_dir, "tiny_whisper", 24))
    assert limit.seconds == 30
    assert "the limit of 30 s for upstream=tiny-whisper (random) (its 30 s window)" in limit.text
    # a machine whose half cannot hold one window of whisper-large (1.5 B parameters: 6 GB) takes no clip
    too_small = clip_limit(run_config(conf_dir, "whisper_large", 8))
    assert too_small.seconds == 0
    assert "with 8 GiB (extraction.memory_gib; 50% of it does not hold the process and the model's weights)" in (
        too_small.text
    )


def test_the_shipped_hub_models_sizes_are_their_configs(conf_dir):
    # the layer counts the conf files state (num_layers = blocks + 1)
    expected = {"wav2vec2_base": 13, "wav2vec2_large_lv60": 25, "hubert_xl": 49, "wavlm_large": 25}
    expected.update({"whisper_base": 7, "whisper_small": 13, "whisper_medium": 25, "whisper_large": 33})
    for name, states in expected.items():
        arch = architecture_of(upstream(conf_dir, name))
        assert arch.states == states, name
        assert f"num_layers = blocks + 1 = {states}" in (conf_dir / "upstream" / f"{name}.yaml").read_text()
    assert architecture_of(upstream(conf_dir, "hubert_xl")).width == 1280
    assert architecture_of(upstream(conf_dir, "whisper_large")).width == 1280


def test_fbank_and_mfcc_sizes_come_from_their_keys_and_a_key_left_out_is_the_constructors_default(conf_dir):
    fbank, mfcc = "speechbias.upstream.classical.FbankUpstream", "speechbias.upstream.classical.MfccUpstream"
    # (node, frames/s, width, FFT bins, hop in samples) at 16 kHz: 10 ms = 160 samples, 20 ms = 320, 12.5 ms = 200
    cases = [
        ({"_target_": fbank}, 100.0, 80, 512, 160),  # FbankUpstream(): n_mels 80, n_fft 512, hop 10 ms
        ({"_target_": mfcc}, 100.0, 40, 512, 160),  # MfccUpstream(): n_mfcc 40
        ({"_target_": fbank, "n_mels": 40, "hop_ms": 20}, 50.0, 40, 512, 320),
        ({"_target_": mfcc, "n_mfcc": 13, "n_fft": 1024, "hop_ms": 12.5}, 80.0, 13, 1024, 200),
    ]
    for node, frame_rate, width, bins, hop in cases:
        arch = architecture_of(OmegaConf.create(node))
        assert (arch.kind, arch.states, arch.frame_rate, arch.width) == ("fbank", 1, frame_rate, width), node
        assert (arch.front_channels, arch.front_stride) == (bins, hop), node
    # the shipped options write the defaults out: the same sizes
    for name, node in (("fbank", cases[0][0]), ("mfcc", cases[1][0])):
        assert architecture_of(upstream(conf_dir, name)) == architecture_of(OmegaConf.create(node))


def test_an_upstream_not_known_before_it_is_built_is_taken_as_the_largest(conf_dir):
    s3prl = OmegaConf.load(conf_dir / "upstream" / "s3prl.yaml")
    s3prl.name = "wavlm_large"
    assert architecture_of(s3prl).states == LARGEST.states == 49
    unknown = OmegaConf.create({"_target_": "speechbias.upstream.hf.HFUpstream", "model_id": "someone/unknown-model"})
    arch = architecture_of(unknown)
    assert arch.kind == "wavlm" and arch.width == 1280 and "someone/unknown-model" in arch.source


@pytest.mark.parametrize("name", ["tiny_wav2vec2", "tiny_hubert", "tiny_wavlm", "tiny_whisper"])
def test_the_parameter_count_is_near_the_built_models(conf_dir, name):
    import hydra.utils

    built = hydra.utils.instantiate(upstream(conf_dir, name))
    real = sum(p.numel() for p in built.model.parameters())
    if name == "tiny_whisper":  # the loaded WhisperModel held the decoder too
        from transformers import WhisperConfig, WhisperModel

        config = OmegaConf.to_container(upstream(conf_dir, name).config)
        real = sum(p.numel() for p in WhisperModel(WhisperConfig(**config)).parameters())
    predicted = architecture_of(upstream(conf_dir, name)).parameters
    assert 0.8 * real < predicted < 1.25 * real, (predicted, real)


def test_max_clip_seconds_takes_auto_or_a_positive_number():
    assert ExtractionSettings().max_clip_seconds == "auto"
    assert ExtractionSettings(max_clip_seconds="90").max_clip_seconds == 90.0
    for bad in ("automatic", 0, -5, "nan"):
        with pytest.raises(ConfigError, match=r"^extraction.max_clip_seconds=.*: must be a number > 0 or auto"):
            ExtractionSettings(max_clip_seconds=bad)
    assert ExtractionSettings(memory_gib=12).memory_gib == 12.0
    with pytest.raises(ConfigError, match=r"^extraction.memory_gib=0: must be a number > 0 \(or null\)"):
        ExtractionSettings(memory_gib=0)


def test_cgroup_limits_are_read_from_the_process_cgroup_and_those_above_it(tmp_path):
    proc = tmp_path / "cgroup"
    root = tmp_path / "fs"
    (root / "slurm" / "job_7").mkdir(parents=True)
    proc.write_text("0::/slurm/job_7\n")
    (root / "slurm" / "job_7" / "memory.max").write_text("max\n")
    assert cgroup_limit_bytes(proc, root) is None
    (root / "slurm" / "memory.max").write_text(f"{6 * GIB}\n")
    assert cgroup_limit_bytes(proc, root) == 6 * GIB
    (root / "slurm" / "job_7" / "memory.max").write_text(f"{4 * GIB}\n")
    assert cgroup_limit_bytes(proc, root) == 4 * GIB
    # cgroup v1: the memory controller's limit_in_bytes
    (root / "memory" / "job").mkdir(parents=True)
    (root / "memory" / "job" / "memory.limit_in_bytes").write_text(f"{3 * GIB}\n")
    proc.write_text("4:memory:/job\n1:cpu:/\n")
    assert cgroup_limit_bytes(proc, root) == 3 * GIB


def _fake_nvidia_smi(folder, output: str, status: int = 0):
    """An ``nvidia-smi`` executable on PATH that prints ``output`` (the CSV of the query) and exits ``status``."""
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat <<'END'\n{output}\nEND\nexit {status}\n")
    script.chmod(0o755)


def test_a_gpu_run_is_bounded_by_the_smallest_visible_gpu_as_nvidia_smi_reports_it(tmp_path, monkeypatch):
    from speechbias.features import memory_size

    _fake_nvidia_smi(tmp_path, "0, GPU-aaaa, 81559\n1, GPU-bbbb, 40960")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    gpu_run = OmegaConf.create({"trainer": {"accelerator": "gpu"}, "extraction": {}})
    try:
        for visible, mib in ((None, 40960), ("0", 81559), ("GPU-bbbb", 40960), ("1,0", 40960)):
            if visible is None:
                monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
            else:
                monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
            memory_size.gpu_memory_bytes.cache_clear()
            assert clip_memory.run_memory(gpu_run) == (mib * 2**20, "the GPU's"), visible
        # a CPU run, or a GPU run where nvidia-smi fails, is bounded by the host's memory
        cpu_run = OmegaConf.create({"trainer": {"accelerator": "cpu"}, "extraction": {}})
        assert clip_memory.run_memory(cpu_run) == (memory_size.host_memory_bytes(), "the host's")
        _fake_nvidia_smi(tmp_path, "NVIDIA-SMI has failed", status=9)
        memory_size.gpu_memory_bytes.cache_clear()
        assert clip_memory.run_memory(gpu_run) == (memory_size.host_memory_bytes(), "the host's")
        # extraction.memory_gib wins over both
        given = OmegaConf.create({"trainer": {"accelerator": "gpu"}, "extraction": {"memory_gib": 3}})
        assert clip_memory.run_memory(given) == (3 * GIB, "extraction.memory_gib")
    finally:
        memory_size.gpu_memory_bytes.cache_clear()


@pytest.mark.parametrize("entry", ["evaluate", "train"])
def test_a_manifest_built_during_the_run_gets_the_same_limit_as_the_pre_run_check(conf_dir, tmp_path, entry):
    import hydra.utils
    import numpy as np
    import pandas as pd
    import soundfile as sf
    from hydra import compose, initialize_config_dir

    from speechbias.stimuli import ManifestError

    overrides = ["extraction.memory_gib=1.6", f"paths.cache_dir={tmp_path / 'cache'}"]
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(entry, overrides=overrides, return_hydra_config=True)
    node = cfg.task.run.clip_check
    check = hydra.utils.instantiate(node)
    # fbank in batches of 2 (the CPU default) with 1.6 GiB, worked by hand as in tests/faults/test_bounded_input.py
    per_second = 1.25 * (24 * 16_000 + 2 * 512 * 100 * 4 + 100 * 80 * 4)
    expected = int((0.5 * 1.6 * GIB - 768 * 2**20) / 2 // per_second)
    assert check.max_seconds == expected
    assert check.limit_text.startswith(f"the limit of {expected} s for upstream=fbank with 1.6 GiB")
    rows = []
    for i, seconds in enumerate((1, expected + 2)):
        path = tmp_path / f"clip{i}.wav"
        sf.write(path, np.zeros(16_000 * seconds, dtype="float32") + 0.01 * (i + 1), 16_000)
        rows.append({"path": str(path), "role": "XYAB"[i]})
    with pytest.raises(ManifestError, match=rf"1 clip\(s\) longer than the limit of {expected} s .*clip1.wav"):
        check.apply(pd.DataFrame(rows), "built")
    # a number is taken as given, and the line names the setting
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(entry, overrides=[*overrides, "extraction.max_clip_seconds=1800"], return_hydra_config=True)
    numbered = hydra.utils.instantiate(cfg.task.run.clip_check)
    assert (numbered.max_seconds, numbered.limit_text) == (1800.0, None)
    numbered.apply(pd.DataFrame(rows), "built")


def test_a_configs_auto_limit_is_computed_once_for_both_resolvers_and_again_for_another_config(
    conf_dir, tmp_path, monkeypatch
):
    from hydra import compose, initialize_config_dir

    import speechbias.launch.entry  # noqa: F401  (registers the resolvers)

    computed = []
    real = clip_memory.clip_limit
    monkeypatch.setattr(clip_memory, "clip_limit", lambda cfg: computed.append(1) or real(cfg))
    monkeypatch.setattr(clip_memory, "_limits", {})
    configs = []
    for memory in (1.6, 1.7):
        overrides = [f"extraction.memory_gib={memory}", f"paths.cache_dir={tmp_path / 'cache'}"]
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            configs.append(compose("evaluate", overrides=overrides, return_hydra_config=True))
    node = configs[0].task.run.clip_check
    seconds, text = node.max_seconds, node.limit_text  # the two resolvers
    assert len(computed) == 1 and text.startswith(f"the limit of {seconds:g} s for upstream=fbank with 1.6 GiB")
    assert clip_memory.clip_length_limit(configs[0]) == (seconds, text) and len(computed) == 1
    # another memory is another limit: computed anew
    assert configs[1].task.run.clip_check.limit_text.startswith("the limit of ") and len(computed) == 2
