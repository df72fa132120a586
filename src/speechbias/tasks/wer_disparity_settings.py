"""The ASR disparity task's settings (``task=wer_disparity``: ``task.*``, ``task.glmm.*``, ``corpus.*``), checked
on construction (:mod:`speechbias.checked_settings`); built by the config checks before any model or corpus
read and by the entry point for :class:`~speechbias.tasks.wer_disparity.WerDisparityTask` (:data:`TASK_SETTINGS`)."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.asr.scoring import NORMALIZERS
from speechbias.asr.tiny_models import TINY_CTC_FAMILIES
from speechbias.checked_settings import SEED, Settings, boolean, choice, device, integer, number, setting, text, texts
from speechbias.errors import ConfigError

# compute dtypes of the ASR models (auto: bfloat16 on CUDA, float32 on CPU)
ASR_DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class WerDisparitySettings(Settings):
    """``task.*`` of task=wer_disparity (``shard_count`` > 1: a job transcribes its shard only, no analysis)."""

    NODE = "task"

    normalizer: str = setting(choice(*NORMALIZERS), "whisper_english", "text normalisation before scoring")
    categories: tuple[str, ...] | None = setting(texts(optional=True), None, "demographic columns; null: the corpus's")
    include_undisclosed: bool = setting(boolean(), False, "compare the level undisclosed like a group")
    shard_index: int = setting(integer(0), 0, "the shard this job transcribes, < task.shard_count")
    shard_count: int = setting(integer(1), 1, "shards of the transcription")
    progress: bool = setting(boolean(), True, "the transcription progress bar")
    wer_ci_resamples: int = setting(integer(1), 1000, "bootstrap resamples of the per-group WER CIs")

    def __post_init__(self):
        super().__post_init__()
        if self.shard_index >= self.shard_count:
            raise ConfigError(
                f"task.shard_index={self.shard_index}: must be < task.shard_count={self.shard_count} "
                "(shards are numbered from 0)"
            )


@dataclass(frozen=True)
class GlmmSettings(Settings):
    """``task.glmm.*``: Table 3's mixed-effects Poisson fit (``n_agq`` k > 1: adaptive Gauss-Hermite with k
    nodes; ``covariates``: fixed effects, columns of the utterance table)."""

    NODE = "task.glmm"

    n_agq: int = setting(integer(1), 1, "1 = Laplace, k > 1 = k quadrature nodes")
    covariates: tuple[str, ...] = setting(texts(), [], "extra fixed effects")
    n_resamples: int = setting(integer(1), 1000, "speaker-bootstrap resamples")
    confidence: float = setting(number(0, 1, low_open=True, high_open=True), 0.95, "the CIs' level")
    n_jobs: int = setting(integer(1), 1, "parallel fits")


@dataclass(frozen=True)
class CorpusSettings(Settings):
    """``corpus.*`` besides its loader (``corpus.load``, the loader's own arguments): its ``name`` and
    whether it is the shipped synthetic corpus (``demo``)."""

    NODE = "corpus"

    name: str | None = setting(text(optional=True), None, "the corpus's name")
    demo: bool = setting(boolean(), False, "the shipped synthetic corpus")


@dataclass(frozen=True)
class MinGroupSettings(Settings):
    """``corpus.min_group.*``: the smallest group compared (utterances, speakers); null: Fair-Speech's."""

    NODE = "corpus.min_group"

    utterances: int | None = setting(integer(1, optional=True), None, "the fewest utterances of a group")
    speakers: int | None = setting(integer(1, optional=True), None, "the fewest speakers of a group")


@dataclass(frozen=True)
class CorpusLoadSettings(Settings):
    """``corpus.load.*``: the keys of the corpus loaders (asr.corpora), checked when the option has them (the
    files and columns themselves: the loader's CorpusError)."""

    NODE = "corpus.load"

    manifest: str | None = setting(text(optional=True), None, "the utterance table")
    root: str | None = setting(text(optional=True), None, "the folder of relative audio paths")
    metadata: str | None = setting(text(optional=True), None, "the corpus's metadata file")
    audio_dir: str | None = setting(text(optional=True), None, "the corpus's audio folder")
    categories: tuple[str, ...] | None = setting(texts(optional=True), None, "the demographic categories")
    l1_languages: tuple[str, ...] | None = setting(
        texts(optional=True), None, "first languages recoded as L1; null keeps them"
    )
    sep: str | None = setting(text(optional=True, nonempty=False), None, "the table's separator; null: guessed")
    path_column: str | None = setting(text(optional=True), None, "the audio path column")
    transcript_column: str | None = setting(text(optional=True), None, "the reference transcript column")
    id_column: str | None = setting(text(optional=True), None, "the utterance id column")
    speaker_column: str | None = setting(text(optional=True), None, "the speaker column")
    category_columns: tuple[str, ...] | None = setting(texts(optional=True), None, "the demographic columns")
    undisclosed_values: tuple[str, ...] | None = setting(texts(optional=True), None, "answers read as undisclosed")


@dataclass(frozen=True)
class AsrSettings(Settings):
    """``asr.*``: the keys the ASR model options share, checked when the option has them."""

    NODE = "asr"

    name: str | None = setting(text(optional=True), None, "the model's name")
    model_id: str | None = setting(text(optional=True), None, "a hub id or a local folder")
    revision: str | None = setting(text(optional=True), None, "the hub revision")
    family: str | None = setting(choice(*TINY_CTC_FAMILIES, optional=True), None, "the tiny model's family")
    device: str | None = setting(device(optional=True), None, "where the model runs")
    dtype: str | None = setting(choice(*ASR_DTYPES, optional=True), None, "the compute dtype")
    batch_size: int | None = setting(integer(1, optional=True), None, "utterances per forward")
    max_new_tokens: int | None = setting(integer(1, optional=True), None, "the longest transcript in tokens")
    num_beams: int | None = setting(integer(1, optional=True), None, "beam search width")
    task: str | None = setting(choice("transcribe", "translate", optional=True), None, "Whisper's task")
    language: str | None = setting(text(optional=True), None, "Whisper's language")
    seed: int = setting(SEED, 0, "the tiny model's seed")
    demo: bool = setting(boolean(), False, "a tiny random model")
    cache_dir: str | None = setting(text(optional=True), None, "the Hugging Face cache")


# the settings groups the task object receives (constructor keyword -> class), built by launch.entry.build_task
TASK_SETTINGS = {
    "settings": WerDisparitySettings,
    "glmm": GlmmSettings,
    "corpus_settings": CorpusSettings,
    "min_group": MinGroupSettings,
}
# every settings group wer_disparity_checks builds: the task's, then those only checked
SETTINGS = (*TASK_SETTINGS.values(), CorpusLoadSettings, AsrSettings)
