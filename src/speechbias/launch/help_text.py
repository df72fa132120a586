"""The ``--help`` of train.py and evaluate.py: each config group the entry point uses, each option with
what it is, the launchers, the main keys and examples, built from conf/ itself.

An option's description is its YAML's ``description:`` (bias tests) or else the first sentence of its
leading comment; options that are ConfigStore nodes (``aggregation``) are described by their pattern. A
main key's text is its settings field's (:mod:`speechbias.checked_settings`: its doc, what it accepts and
its default), found in the entry point's settings groups as the config checks list them.
Hydra prints it through ``conf/hydra/help/speechbias.yaml`` (``template: ${speechbias.help:<entry>}``);
:func:`register_help_resolver` registers that resolver, and the entry points call it before Hydra parses
the command line. Import-light: yaml and omegaconf at import; the settings modules (no torch, pandas or
Lightning) only when the text is made.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL

RESOLVER = "speechbias.help"
WIDTH = 110  # the longest line of a description, in characters
NAME_WIDTH = 30  # the column of option names
ABSENT = object()  # a key no YAML holds
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
#: the main keys of each entry point, in the order shown; each line's text is its settings field's (the
#: schema's doc, what it accepts and its default: :func:`key_lines`)
KEYS = {
    "evaluate": [
        "seed",
        "force",
        "speat.n_permutations",
        "speat.se_curve",
        "paths.data_root",
        "paths.cache_dir",
        "model_id",
        "sweep_dir",
    ],
    "train": ["lr", "max_steps", "bias_tests", "seed", "force", "paths.data_root"],
}
#: keys shown that are no settings field, with their text: train.py's ``bias_tests`` lists names of
#: conf/bias_test/*.yaml or inline test configs (strings or mappings, which no settings kind takes), checked
#: against the config folder by tasks.train_ser_checks.propagation_test_nodes
NOT_SETTINGS = {"bias_tests": "the tests whose propagation is measured: names of conf/bias_test/*.yaml"}
#: the kinds of setting whose default reads well on a help line (a path or a label does not)
SHOWN_DEFAULT_KINDS = ("int", "float", "bool", "choice", "floats", "device")
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


def settings_groups(entry_config: dict, conf_dir: Path):
    """The settings groups of an entry point, lazily: the shared ones, then each task's ``SETTINGS`` (the
    entry config's ``task.name``, else every option of conf/task/ in name order); a task's checks module is
    imported only when no group before it holds the key looked up."""
    from speechbias.launch.config_checks import shared_settings, task_checks_module

    yield from shared_settings()
    task = entry_config.get("task")
    name = task.get("name") if isinstance(task, dict) else None
    for task_name in [name] if name else sorted(p.stem for p in (conf_dir / "task").glob("*.yaml")):
        yield from getattr(task_checks_module(task_name), "SETTINGS", ())


def setting_field(key: str, groups) -> dataclasses.Field | None:
    """The settings field whose user key is ``key`` (the first of ``groups`` that has it); None if none."""
    from speechbias.checked_settings import setting_fields

    for group in groups:
        for found in setting_fields(group):
            if group.key_of(found.name) == key:
                return found
    return None


def yaml_value(conf_dir: Path, entry_config: dict, chosen: dict[str, str], key: str):
    """The value ``key`` has, unresolved, in the YAML an entry's default config takes it from: the default
    option of the group named by its first part (``paths.data_root``: conf/paths/default.yaml), else the
    entry's own config; :data:`ABSENT` when neither holds it."""
    first, _, rest = key.partition(".")
    option = conf_dir / first / f"{chosen.get(first)}.yaml"
    node, path = (
        (yaml.safe_load(option.read_text(encoding="utf-8")), rest) if rest and option.is_file() else (entry_config, key)
    )
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def default_text(found: dataclasses.Field, written) -> str:
    """``default <value>`` of a settings field, as typed; empty where it does not read well: a path or a
    label, no default or null, or a key whose YAML (``written``) does not give it literally (an
    interpolation such as max_steps' ``${oc.select:ser_data.max_steps,20000}``, ``???``, absent)."""
    from speechbias.checked_settings import ACCEPTS, shown

    accepts = found.metadata[ACCEPTS]
    if found.default is not dataclasses.MISSING:
        default = found.default
    elif found.default_factory is not dataclasses.MISSING:
        default = found.default_factory()
    else:
        return ""
    literal = not (isinstance(written, str) and ("${" in written or written == "???"))
    if accepts.kind not in SHOWN_DEFAULT_KINDS or default is None or written is ABSENT or not literal:
        return ""
    if accepts.kind == "floats" and len(default) == 1:
        default = default[0]
    return f"default {shown(default)}"


def key_lines(key: str, parts: list[str]) -> list[str]:
    """The help lines of ``key``: its name, then ``parts`` joined by '; ', a part that would make the text
    longer than :data:`WIDTH` characters continued on the next line under the first (a part longer than
    that broken between words)."""
    head = f"    {key:<{NAME_WIDTH}}  "
    lines, line = [], head + parts[0]
    for part in parts[1:]:
        if len(line) + 2 + len(part) <= len(head) + WIDTH:
            line += "; " + part
        else:
            lines.append(line + ";")
            line = " " * len(head) + part
    # a part longer than a line on its own is broken between words
    indent = " " * len(head)
    return [w for ln in [*lines, line] for w in textwrap.wrap(ln, len(head) + WIDTH, subsequent_indent=indent)]


def main_key_lines(entry: str, conf_dir: Path, chosen: dict[str, str]) -> list[str]:
    """The "Main keys" lines of entry point ``entry``: each key of :data:`KEYS` with its settings field's
    doc, what it accepts and its default (:func:`default_text`); a key of :data:`NOT_SETTINGS` with its text."""
    from speechbias.checked_settings import ACCEPTS

    entry_config = yaml.safe_load((conf_dir / f"{entry}.yaml").read_text(encoding="utf-8"))
    lines = []
    for key in KEYS[entry]:
        if key in NOT_SETTINGS:
            lines += key_lines(key, [NOT_SETTINGS[key]])
            continue
        found = setting_field(key, settings_groups(entry_config, conf_dir))
        if found is None:
            raise LookupError(f"--help: {key} is no settings field of {entry}.py; add it to NOT_SETTINGS")
        default = default_text(found, yaml_value(conf_dir, entry_config, chosen, key))
        accepts = found.metadata[ACCEPTS].describe()
        lines += key_lines(key, [found.metadata["doc"], f"{accepts}, {default}" if default else accepts])
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
    out += main_key_lines(entry, conf_dir, chosen)
    out += [
        "",
        f"Every key and its value: python {entry}.py --cfg job   (add overrides to see their effect)",
        "",
    ]
    return "\n".join(out).replace("$", "$$") + "Hydra's flags:\n$FLAGS_HELP"


def register_help_resolver(conf_dir: str | Path) -> None:
    """Register ``${speechbias.help:<entry>}`` (the text of :func:`entry_help` from ``conf_dir``)."""
    OmegaConf.register_new_resolver(RESOLVER, lambda entry: entry_help(str(entry), conf_dir), replace=True)
