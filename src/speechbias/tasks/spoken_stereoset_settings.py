"""The Spoken StereoSet task's settings (``task=spoken_stereoset``: ``task.*``, ``task.answer.*``,
``task.statistics.*``; decoding and prompts are :class:`~speechbias.sllm.adapters.base.SamplingParams` and
:class:`~speechbias.sllm.prompts.PromptTemplate`), checked on construction
(:mod:`speechbias.checked_settings`); built by the config checks before any model or data read and by the
entry point for the task object (:data:`TASK_SETTINGS`)."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.checked_settings import SEED, Settings, boolean, choice, device, integer, number, setting, text, texts
from speechbias.sllm.adapters.base import SamplingParams
from speechbias.sllm.adapters.policy import POLICIES, STYLES
from speechbias.sllm.data import GROUP_COLUMNS
from speechbias.sllm.prompts import ORDER_MODES, PromptTemplate
from speechbias.sllm.rouge import METHODS as ROUGE_METHODS

MISSING_AUDIO = ("error", "skip")
DEMO_CAVEAT_SETTINGS = ("auto", "true", "false")
# compute dtypes of the speech LLMs (auto: bfloat16 on CUDA, float32 on CPU)
LLM_DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class SpokenStereoSetSettings(Settings):
    """``task.*`` of task=spoken_stereoset (``max_items`` null: every item)."""

    NODE = "task"

    data_dir: str = setting(text(), "spoken_stereoset", "the set in its released layout")
    version: str = setting(text(), "v1.0", "metadata/<domain>_<version>.csv")
    domains: tuple[str, ...] = setting(texts(*GROUP_COLUMNS, nonempty=True), list(GROUP_COLUMNS), "the domains")
    on_missing_audio: str = setting(choice(*MISSING_AUDIO), "error", "rows whose WAV is missing")
    max_items: int | None = setting(integer(1, optional=True), None, "the first N item ids per domain")
    demo_caveat: str = setting(choice(*DEMO_CAVEAT_SETTINGS), "auto", "say the numbers are plumbing")
    orders: str = setting(choice(*ORDER_MODES), "shuffled", "option letters: one seeded order or all 6")
    text_only: bool = setting(boolean(), False, "the transcript instead of the audio")
    batch_size: int = setting(integer(1), 8, "requests per generate call")

    def __post_init__(self):
        if isinstance(self.demo_caveat, bool):  # task.demo_caveat=true on the command line is a bool
            object.__setattr__(self, "demo_caveat", str(self.demo_caveat).lower())
        super().__post_init__()


@dataclass(frozen=True)
class AnswerSettings(Settings):
    """``task.answer.*``: the answer-mapping rules' thresholds (:mod:`speechbias.sllm.answers`)."""

    NODE = "task.answer"

    cer_threshold: float = setting(number(0, 1), 0.1, "rule cer: the largest character error rate")
    min_word_recall: float = setting(number(0, 1), 0.8, "rule most_words: the least share of an option's words")


@dataclass(frozen=True)
class StatisticsSettings(Settings):
    """``task.statistics.*``: the dataset statistics (Table 2, Fig. 1)."""

    NODE = "task.statistics"

    enabled: bool = setting(boolean(), True, "compute the dataset statistics")
    rouge_method: str = setting(choice(*ROUGE_METHODS), "rapidfuzz", "ROUGE-L's implementation")
    histogram_bins: int = setting(integer(1), 30, "bins of the ROUGE-L histogram")


@dataclass(frozen=True)
class SpeechLlmSettings(Settings):
    """``sllm.*``: the keys the speech LLM options share, checked when the option has them (``model_kwargs``
    and ``generate_kwargs`` are transformers' own, passed on as they are)."""

    NODE = "sllm"

    name: str | None = setting(text(optional=True), None, "the model's name")
    model_id: str | None = setting(text(optional=True), None, "a hub id or a local folder")
    revision: str | None = setting(text(optional=True), None, "the hub revision")
    device: str | None = setting(device(optional=True), None, "where the model runs")
    dtype: str | None = setting(choice(*LLM_DTYPES, optional=True), None, "the compute dtype")
    seed: int = setting(SEED, 0, "the tiny model's seed")
    system_prompt: str | None = setting(text(optional=True, nonempty=False), None, "the system prompt")
    style: str | None = setting(choice(*STYLES, optional=True), None, "the policy model's answer style")
    policy: str | None = setting(choice(*POLICIES, optional=True), None, "the policy model's rule")
    model_class: str | None = setting(text(optional=True), None, "the transformers model class")
    processor_class: str | None = setting(text(optional=True), None, "the transformers processor class")


# the settings groups the task object receives (constructor keyword -> class), built by launch.entry.build_task
TASK_SETTINGS = {
    "settings": SpokenStereoSetSettings,
    "answer": AnswerSettings,
    "statistics": StatisticsSettings,
    "sampling": SamplingParams,
    "prompt": PromptTemplate,
}
# every settings group spoken_stereoset_checks builds: the task's, then those only checked
SETTINGS = (*TASK_SETTINGS.values(), SpeechLlmSettings)
