"""The ``--help`` of train.py and evaluate.py: each config group the entry point uses, each option with
what it is, the launchers, the main keys and examples, built from conf/ itself.

An option's description is its YAML's ``description:`` (bias tests) or else the first sentence of its
leading comment; options that are ConfigStore nodes (``aggregation``) are described by their pattern.
Hydra prints it through ``conf/hydra/help/speechbias.yaml`` (``template: ${speechbias.help:<entry>}``);
:func:`register_help_resolver` registers that resolver, and the entry points call it before Hydra parses
the command line. Import-light: yaml and omegaconf only.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL

RESOLVER = "speechbias.help"
WIDTH = 110  # the longest line of a description, in characters
NAME_WIDTH = 30  # the column of option names
ABBREVIATIONS = ("e.g", "i.e", "vs", "cf", " al")  # a period after these ends no sentence
#: groups every run has but that hold one option of plumbing, not a choice
NOT_CHOICES = {"paths", "sweep", "bias_test_base"}
#: the purpose of each config group, shown in the group's heading
GROUP_PURPOSE = {
    "task": "what evaluate.py computes",
    "upstream": "the speech model whose representations are tested (tiny_*: random test models)",
    "aggregation": "how frames and layers become one vector per clip",
    "bias_test": "the stimuli: groups X, Y and attributes A, B (several: bias_tests=[...] in train.py)",
    "selection": "how the paper's stimuli are chosen",
    "trainer": "the Lightning Trainer (device, DDP)",
    "logger": "where metrics go besides the run folder's files",
    "asr": "the ASR model of task=wer_disparity",
    "corpus": "the ASR corpus of task=wer_disparity",
    "sllm": "the speech LLM of task=spoken_stereoset",
    "downstream": "the SER head trained on the upstream's features",
    "ser_data": "the valence-rated speech the SER head is trained on",
    "experiment": "a paper's reproduction as one sweep (use with -m)",
}
LAUNCHERS = {
    "basic": "Hydra's own: the jobs of a sweep one after another in this process",
    "parallel": None,  # from conf/hydra/launcher/parallel.yaml
    "slurm": None,
}
KEYS = {
    "evaluate": [
        ("seed", "seed of every random draw (stimulus selection, permutations, bootstrap)"),
        ("force", "recompute even where the run folder holds finished results"),
        ("speat.n_permutations", "permutations of the one-sided p (exact when fewer partitions exist)"),
        ("speat.se_curve", "also the bootstrap SE of d vs. number of stimuli"),
        ("paths.data_root", "where the corpora are (SPEECHBIAS_DATA)"),
        ("paths.cache_dir", "the feature cache (SPEECHBIAS_CACHE)"),
        ("model_id", "with upstream=hf: any hub id or local model folder"),
        ("sweep_dir", "with task=report: the sweep folder to report on, e.g. multirun/paper_speat"),
    ],
    "train": [
        ("lr", "learning rate, or several heads at once: 'lr=[1e-3,1e-4,1e-5]'"),
        ("max_steps", "training steps of the valence head"),
        ("bias_tests", "the tests whose propagation is measured"),
        ("seed", "seed of the split, the heads' init and the selection"),
        ("force", "recompute even where the run folder holds finished results"),
        ("paths.data_root", "where the corpora are (SPEECHBIAS_DATA)"),
    ],
}
EXAMPLES = {
    "evaluate": [
        "python evaluate.py                                             # offline demo (fbank, synthetic test)",
        "python evaluate.py upstream=hubert_xl bias_test=female_male paths.data_root=/data/speat",
        "python evaluate.py -m experiment=paper_speat hydra/launcher=parallel",
        "python evaluate.py task=report sweep_dir=multirun/paper_speat",
        "python evaluate.py task=wer_disparity asr=whisper_small corpus=fair_speech",
    ],
    "train": [
        "python train.py                                                # offline demo (fbank, synthetic valence set)",
        "python train.py upstream=hubert_xl lr=1e-4 ser_data=mess",
        "python train.py -m experiment=paper_propagation",
    ],
}


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to '. ' or the end), shortened to :data:`WIDTH` characters."""
    text = " ".join(text.split())
    ends = (m.start() for m in re.finditer(r"(?<=[a-z0-9)\]`])\.(\s|$)", text))
    end = next((i for i in ends if not text[:i].endswith(ABBREVIATIONS)), len(text))
    sentence = text[:end]
    return sentence if len(sentence) <= WIDTH else sentence[: WIDTH - 3].rstrip() + "..."


def option_description(path: Path) -> str:
    """What the option file at ``path`` is: its ``description:`` key, else its leading comment's first
    sentence (a ``# @package`` line skipped); empty when it has neither."""
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.safe_load(text)
    except yaml.YAMLError:
        node = None
    if isinstance(node, dict) and isinstance(node.get("description"), str):
        return first_sentence(node["description"])
    comment = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            comment.append(line.lstrip("#").strip())
    return first_sentence(" ".join(comment))


def _defaults(primary: Path) -> tuple[list[str], dict[str, str]]:
    """The groups of ``primary``'s defaults list, in order, and the default option of each."""
    groups, chosen = [], {}
    for entry in yaml.safe_load(primary.read_text(encoding="utf-8")).get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key.startswith("override ") or key.startswith("/"):
                    continue
                groups.append(key)
                chosen[key] = "" if value is None else str(value)
    return groups, chosen


def _for_entry(option: Path, entry: str) -> bool:
    """An experiment belongs to the entry point its usage line runs (``python <entry>.py ... experiment=``);
    one with no such line to both."""
    runs = set(re.findall(r"python (\w+)\.py[^\n]*experiment=" + re.escape(option.stem), option.read_text()))
    return not runs or entry in runs


def _group_lines(conf_dir: Path, group: str, default: str, entry: str) -> list[str]:
    folder = conf_dir / group
    if group == "aggregation":
        count = len(TEMPORAL) * len(LAYER_CHOICES)
        return [
            f"    {'<temporal>_<layer>':<{NAME_WIDTH}}  temporal {'|'.join(TEMPORAL)} over frames x layer "
            f"{'|'.join(LAYER_CHOICES)}",
            f"    {'':<{NAME_WIDTH}}  ({count} options, e.g. max_q3; default {default})",
        ]
    options = sorted(p for p in folder.glob("*.yaml") if group != "experiment" or _for_entry(p, entry))
    lines = []
    for option in options:
        name = option.stem + (" (default)" if option.stem == default else "")
        lines.append(f"    {name:<{NAME_WIDTH}}  {option_description(option)}".rstrip())
    return lines


def entry_help(entry: str, conf_dir: str | Path) -> str:
    """The help text of entry point ``entry`` ("train" or "evaluate") from the config folder ``conf_dir``.
    Hydra's ``$FLAGS_HELP`` stays in it (Hydra fills it in); any other ``$`` is escaped."""
    conf_dir = Path(conf_dir)
    entry = entry if entry in KEYS else "evaluate"
    groups, chosen = _defaults(conf_dir / f"{entry}.yaml")
    what = {
        "evaluate": "measure bias in a pre-trained speech model: SpEAT (default), ASR disparities (task=wer_disparity),\n"
        "Spoken StereoSet (task=spoken_stereoset), and the report of a sweep (task=report).",
        "train": "train a valence (SER) head on a speech model's features and measure how the model's bias\n"
        "propagates to it (Cohen's d of predicted valence, X vs. Y, and its sign against SpEAT d).",
    }[entry]
    out = [
        f"{entry}.py: {what}",
        "",
        f"Usage: python {entry}.py [group=option ...] [key=value ...]        one run",
        f"       python {entry}.py -m group=a,b ... [hydra/launcher=...]     a sweep (Hydra multirun)",
        "",
        "Examples:",
        *(f"  {line}" for line in EXAMPLES[entry]),
        "",
        "Config groups (group=option):",
    ]
    for group in groups:
        if group in NOT_CHOICES:
            continue
        out.append(f"  {group}: {GROUP_PURPOSE.get(group, '')}".rstrip(": ").rstrip())
        out.extend(_group_lines(conf_dir, group, chosen.get(group, ""), entry))
    out += ["", "Launchers of a sweep (hydra/launcher=...):"]
    for name, text in LAUNCHERS.items():
        description = text or option_description(conf_dir / "hydra" / "launcher" / f"{name}.yaml")
        out.append(f"    {name + (' (default)' if name == 'basic' else ''):<{NAME_WIDTH}}  {description}")
    out += ["", "Main keys (key=value):"]
    out += [f"    {key:<{NAME_WIDTH}}  {text}" for key, text in KEYS[entry]]
    out += [
        "",
        f"Every key and its value: python {entry}.py --cfg job   (add overrides to see their effect)",
        "",
    ]
    return "\n".join(out).replace("$", "$$") + "Hydra's flags:\n$FLAGS_HELP"


def register_help_resolver(conf_dir: str | Path) -> None:
    """Register ``${speechbias.help:<entry>}`` (the text of :func:`entry_help` from ``conf_dir``)."""
    OmegaConf.register_new_resolver(RESOLVER, lambda entry: entry_help(str(entry), conf_dir), replace=True)
