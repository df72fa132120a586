"""Checks of the config groups whose objects their own ``_target_`` builds (``upstream``, ``trainer``, ``logger``,
``selection``, ``aggregation``, ``propagation.aggregation``, ``bias_test``): one settings class per group
(:mod:`speechbias.checked_settings`), built by the config checks only, so that a wrong value is one line
before the run's folder is made instead of an error from the component's constructor mid-run."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import ListConfig

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL
from speechbias.checked_settings import SEED, Accepts, Settings, boolean, choice, integer, number, setting, text, texts

# the choices of components whose modules import pandas, written out so that a config check imports
# none (report.tracker.KINDS, report.wandb_run.MODES, stimuli.bias_test.RESAMPLING_DESIGNS; a test holds
# them equal)
TRACKER_KINDS = ("wandb", "csv", "none")
WANDB_MODES = ("auto", "online", "offline", "disabled")
RESAMPLING_DESIGNS = ("iid", "paired", "stratified")
# upstream.hf.DTYPES, upstream.families.FAMILIES and upstream.block_states.LAYER_CONVENTION (a test holds them
# equal; those modules import torch)
UPSTREAM_DTYPES = ("float32", "float16", "bfloat16")
UPSTREAM_FAMILIES = ("wav2vec2", "hubert", "wavlm", "whisper")
LAYER_CONVENTIONS = ("block-io-v1",)
# Lightning's accelerator, precision and strategy names (its registries; written out so that the check
# imports no Lightning; a test holds the accelerators and strategies among Lightning's). Left out: what
# needs a package the project does not install (tpu and xla: torch_xla; deepspeed), and the strategies'
# find_unused_parameters variants (every parameter of a head is used); no TPU batch size either
ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "auto")
PRECISIONS = ("64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "64", "32", "16", "bf16")
STRATEGIES = ("auto", "single_device", "ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "fsdp", "fsdp_cpu_offload")


@dataclass(frozen=True)
class TrainerSettings(Settings):
    """``trainer.*`` (the Lightning Trainer factory's arguments)."""

    NODE = "trainer"

    accelerator: str = setting(choice(*ACCELERATORS), "cpu", "Lightning's accelerator")
    devices: int = setting(integer(1), 1, "devices per node; -1: all, auto, or a list of device indices")
    num_nodes: int = setting(integer(1), 1, "nodes")
    strategy: str | None = setting(choice(*STRATEGIES, optional=True), None, "Lightning's strategy")
    precision: str = setting(choice(*PRECISIONS), "32-true", "Lightning's precision")
    logger: bool = setting(boolean(), False, "Lightning's own logger")
    enable_checkpointing: bool = setting(boolean(), False, "Lightning's default checkpoints")
    enable_model_summary: bool = setting(boolean(), False, "Lightning's model summary")
    enable_progress_bar: bool = setting(boolean(), True, "progress bars")

    def __post_init__(self):
        # Lightning also takes devices=-1 (all), auto and a list of device indices ([0, 1]): kept as given
        devices = self.devices
        listed = isinstance(devices, (list, tuple, ListConfig)) and len(devices) > 0
        indices = listed and all(type(d) is int and d >= 0 for d in devices)
        kept = devices in ("auto", -1) or indices
        if kept:
            object.__setattr__(self, "devices", 1)
        super().__post_init__()
        if kept:
            object.__setattr__(self, "devices", list(devices) if indices else devices)


@dataclass(frozen=True)
class LoggerSettings(Settings):
    """``logger.*`` (the run's :class:`~speechbias.report.tracker.Tracker`)."""

    NODE = "logger"

    kind: str = setting(choice(*TRACKER_KINDS), "wandb", "the tracker")
    project: str = setting(text(), "speechbias", "the W&B project")
    entity: str | None = setting(text(optional=True), None, "the W&B entity")
    mode: str = setting(choice(*WANDB_MODES), "auto", "W&B's mode")
    group: str | None = setting(text(optional=True), None, "the W&B group")
    tags: tuple[str, ...] = setting(texts(), [], "W&B tags")
    files_dir: str | None = setting(text(optional=True), None, "W&B's cache and data folders")


@dataclass(frozen=True)
class SelectionSettings(Settings):
    """``selection.*``: how a paper test's stimuli are chosen."""

    NODE = "selection"

    name: str = setting(choice("ours", "paper"), "ours", "ours: the paper's procedures; paper: published lists")
    paper_lists_dir: str | None = setting(text(optional=True), None, "the SpEAT authors' data/ folder")


@dataclass(frozen=True)
class AggregationSettings(Settings):
    """``aggregation.*``: temporal x layer aggregation of a clip's per-layer statistics."""

    NODE = "aggregation"

    temporal: str = setting(choice(*TEMPORAL), "mean", "over a clip's frames")
    layer: str = setting(choice(*LAYER_CHOICES), "sum", "over the upstream's layers")


@dataclass(frozen=True)
class PropagationAggregationSettings(AggregationSettings):
    """``propagation.aggregation.*`` of train.py: the aggregation of the SpEAT d the heads are compared with."""

    NODE = "propagation.aggregation"


@dataclass(frozen=True)
class BiasTestSettings(Settings):
    """``bias_test.*``'s values (its manifest is checked with its clips: tasks.input_checks)."""

    NODE = "bias_test"

    name: str | None = setting(text(optional=True), None, "the test's name")
    manifest: str | None = setting(text(optional=True), None, "the manifest CSV")
    demo_manifest: str | None = setting(text(optional=True), None, "the shipped clips of a demo test")
    human_iat_d: float | None = setting(number(optional=True), None, "the human IAT effect size")
    resampling: str | None = setting(choice(*RESAMPLING_DESIGNS, optional=True), None, "the resampling design")
    x_label: str | None = setting(text(optional=True, nonempty=False), None, "target group X")
    y_label: str | None = setting(text(optional=True, nonempty=False), None, "target group Y")
    a_label: str | None = setting(text(optional=True, nonempty=False), None, "attribute pole A")
    b_label: str | None = setting(text(optional=True, nonempty=False), None, "attribute pole B")
    description: str | None = setting(text(optional=True, nonempty=False), None, "what the test compares")
    root: str | None = setting(text(optional=True), None, "the folder of relative clip paths; null: the manifest's")


@dataclass(frozen=True)
class BiasTestBuilderSettings(Settings):
    """``bias_test.builder.*`` of a corpus-built test (its ``params`` are the selection procedure's own keyword
    overrides, different for each procedure)."""

    NODE = "bias_test.builder"

    test: str | None = setting(text(optional=True), None, "the recipe's name")
    selection: str = setting(choice("ours", "paper"), "ours", "ours: the paper's procedures; paper: published lists")
    paper_lists_dir: str | None = setting(text(optional=True), None, "the SpEAT authors' data/ folder")
    data_root: str | None = setting(text(optional=True), None, "the corpora's folder")
    seed: int = setting(SEED, 0, "the selection's seed")
    manifest_path: str | None = setting(text(optional=True), None, "where the built manifest is cached")
    corpus_dirs: dict | None = setting(Accepts("mapping", optional=True), None, "corpus folders, e.g. {saa: SAA}")
    allow_missing: bool = setting(boolean(), False, "selection=paper: build without clips missing locally")


@dataclass(frozen=True)
class UpstreamSettings(Settings):
    """``upstream.*``: the keys upstream options share (HF checkpoints, s3prl, fbank/mfcc, random controls),
    each checked when the option has it; a tiny test model's ``config``/``model_type`` and s3prl's
    ``extra_conf`` are the model's own (checked when it is built)."""

    NODE = "upstream"

    display_name: str | None = setting(text(optional=True), None, "the run's name of the model")
    randomize: bool = setting(boolean(), False, "re-initialise every weight (random control)")
    seed: int = setting(SEED, 0, "the random control's seed")
    model_id: str | None = setting(text(optional=True), None, "a hub id or a local folder")
    revision: str | None = setting(text(optional=True), None, "the hub revision")
    family: str | None = setting(
        choice(*UPSTREAM_FAMILIES, optional=True), None, "the model family; null: its config's"
    )
    layer_convention: str | None = setting(choice(*LAYER_CONVENTIONS, optional=True), None, "the layer convention")
    dtype: str | None = setting(choice(*UPSTREAM_DTYPES, optional=True), None, "the compute dtype")
    normalize: bool | None = setting(Accepts("bool", optional=True), None, "per-clip normalisation; null: the model's")
    cache_dir: str | None = setting(text(optional=True), None, "the Hugging Face cache")
    name: str | None = setting(text(optional=True), None, "the s3prl upstream's name")
    path_or_url: str | None = setting(text(optional=True), None, "the s3prl upstream's checkpoint")
    refresh: bool = setting(boolean(), False, "s3prl: download again")
    min_samples: int | None = setting(integer(1, optional=True), None, "s3prl: the shortest clip in samples")
    n_mels: int | None = setting(integer(1, optional=True), None, "mel bands")
    n_mfcc: int | None = setting(integer(1, optional=True), None, "MFCC coefficients")
    n_fft: int | None = setting(integer(1, optional=True), None, "FFT size in samples")
    win_ms: float | None = setting(number(0, low_open=True, optional=True), None, "window length in ms")
    hop_ms: float | None = setting(number(0, low_open=True, optional=True), None, "hop in ms")
    f_min: float | None = setting(number(0, optional=True), None, "the lowest mel frequency in Hz")
    f_max: float | None = setting(number(0, low_open=True, optional=True), None, "the highest mel frequency in Hz")


# every group above, checked by launch.config_checks when its node is in the config
COMPONENT_SETTINGS = (
    UpstreamSettings,
    TrainerSettings,
    LoggerSettings,
    SelectionSettings,
    AggregationSettings,
    PropagationAggregationSettings,
    BiasTestSettings,
    BiasTestBuilderSettings,
)
