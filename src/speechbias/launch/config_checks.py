"""Check a run's config before anything heavy is imported or any model is touched.

:func:`check_config` raises :class:`~speechbias.errors.ConfigError` (one line naming the key, the
value and the fix) for values a run cannot use: a required value not given (``???``), a learning rate
that is not a number > 0, a task's missing arguments, folders and files that must exist (the report's
sweep folders, a corpus-built test's corpus folders under ``paths.data_root``, Spoken StereoSet's
``task.data_dir``, a valence ratings file), a bias test's manifest (every clip it lists exists and
decodes, at least :data:`MIN_CLIPS_PER_ROLE` clips per role) and a writable cache folder.
:func:`check_command_line` names unknown config group options (``upstream=...``) before Hydra composes.
Standard library, OmegaConf and Hydra at import; soundfile/numpy only to decode a manifest's clips and the
stimulus registry only for a corpus-built test whose manifest is not built yet; never torch.
"""

from __future__ import annotations

import csv
import difflib
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.config_composition import bias_test_config
from speechbias.project_paths import user_path
from speechbias.run_context import primary_config_dir
from speechbias.errors import ConfigError, error_line, full_error_requested

# a command line that sets a required key, shown in the error line
REQUIRED_EXAMPLES = {
    "sweep_dir": "python evaluate.py task=report sweep_dir=multirun/<date>/<time>",
    "corpus.load.manifest": "python evaluate.py task=wer_disparity corpus=asr_manifest corpus.load.manifest=<csv>",
}
MAX_LISTED = 3
# SpEAT's effect size needs a standard deviation within each role (targets X, Y; attributes A, B)
MIN_CLIPS_PER_ROLE = 2
CORPUS_LAYOUT = "experiments/speat_2023/README.md"
# folder of the cache that records manifests whose clips all decoded (check_manifest_clips)
CLIP_CHECKS = "clip_checks"
# command-line flags after which the config comes from elsewhere (the option check leaves those to Hydra)
OTHER_CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")


def check_config(cfg: DictConfig) -> None:
    """Every check that applies to ``cfg`` (a job config, with or without its ``hydra`` node)."""
    check_required_values(cfg)
    if "lr" in cfg:
        check_learning_rates(cfg.lr)
    task = str(OmegaConf.select(cfg, "task.name", default="") or "")
    if task == "report":
        check_report_arguments(cfg)
        return
    check_writable_folder(OmegaConf.select(cfg, "paths.cache_dir", default=None), "paths.cache_dir")
    if task == "speat" and OmegaConf.select(cfg, "bias_test", default=None) is not None:
        check_bias_test(cfg.bias_test, "bias_test", OmegaConf.select(cfg, "paths.cache_dir", default=None))
    elif task == "wer_disparity":
        for group in ("asr", "corpus"):
            if OmegaConf.select(cfg, group, default=None) is None:
                raise ConfigError(
                    f"{group}: required by task=wer_disparity, e.g. python evaluate.py "
                    "task=wer_disparity asr=whisper_small corpus=fair_speech"
                )
    elif task == "spoken_stereoset":
        check_spoken_stereoset_data(cfg)
    elif task == "train_ser":
        check_step_kernel(OmegaConf.select(cfg, "downstream.step_kernel", default="auto"))
        check_valence_source(cfg)
        check_propagation_tests(cfg)


# the SER heads' training step (speechbias.ser.heads_adam.STEP_KERNELS; kept here so that the check
# imports no torch)
STEP_KERNELS = ("auto", "compiled", "torch")


def check_step_kernel(value) -> None:
    """``downstream.step_kernel``: one of auto, compiled, torch."""
    if value not in STEP_KERNELS:
        raise ConfigError(
            f"downstream.step_kernel={value}: must be one of {', '.join(STEP_KERNELS)} (auto: the "
            "numba-compiled step where numba can be set up, else torch)"
        )


# the job config (without its hydra node, as YAML) that ConfigCheckCallback checked in this process and
# the job has not yet checked again: check_config_unless_checked takes it once
_checked_by_callback: str | None = None


def job_config_text(cfg: DictConfig) -> str:
    """``cfg`` without its ``hydra`` node, as unresolved YAML: what identifies a job's config whether
    it comes with the hydra node (Hydra's callbacks) or without (the task function)."""
    job = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    return OmegaConf.to_yaml(job)


def check_config_unless_checked(cfg: DictConfig) -> None:
    """:func:`check_config`, unless :class:`ConfigCheckCallback` has just checked this very config in
    this process (a single run: Hydra's ``on_run_start``, then the task function): the checks decode
    every manifest clip and compose each bias test, ~0.6 s of a warm train.py run, done once."""
    global _checked_by_callback
    checked, _checked_by_callback = _checked_by_callback, None
    if checked is not None and checked == job_config_text(cfg):
        return
    check_config(cfg)


def check_required_values(cfg: DictConfig) -> None:
    """No ``???`` left outside the ``hydra`` node."""
    missing = sorted(_missing_keys(cfg))
    if missing:
        key = missing[0]
        example = REQUIRED_EXAMPLES.get(key, f"{key}=...")
        raise ConfigError(f"{key}: required, give it on the command line, e.g. {example}")


def _missing_keys(node, prefix: str = "") -> list[str]:
    """Keys whose value is literally ``???`` (interpolations are not resolved; ``hydra`` is skipped)."""
    found = []
    if isinstance(node, DictConfig):
        items = [(str(k), k) for k in node.keys() if not (prefix == "" and k == "hydra")]
    elif isinstance(node, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(node))]
    else:
        return found
    for name, key in items:
        child = node._get_node(key)
        full = f"{prefix}.{name}" if prefix and not name.startswith("[") else f"{prefix}{name}"
        if child is None or child._is_interpolation():
            continue
        if child._is_missing():
            found.append(full)
        elif isinstance(child, (DictConfig, ListConfig)):
            found.extend(_missing_keys(child, full))
    return found


def learning_rates(value) -> list[float]:
    """``lr`` as a list of floats: a number, a numeric string or a list of them."""
    items = list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]
    if not items:
        raise ConfigError("lr=[]: give at least one learning rate, e.g. lr=1e-4 or 'lr=[1e-3,1e-4,1e-5]'")
    rates = []
    for item in items:
        if isinstance(item, bool):
            rate = math.nan
        else:
            try:
                rate = float(item)
            except (TypeError, ValueError):
                rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            shown = value if not isinstance(value, ListConfig) else OmegaConf.to_container(value)
            raise ConfigError(
                f"lr={shown}: {item!r} is not a number > 0; give a learning rate such as lr=1e-4 "
                "or a list, 'lr=[1e-3,1e-4,1e-5]'"
            )
        rates.append(rate)
    return rates


def check_learning_rates(value) -> None:
    learning_rates(value)


def _folder(key: str, value, project_root) -> Path:
    path = user_path(value, project_root)
    if not path.is_dir():
        raise ConfigError(
            f"{key}={value}: no such folder; give the multirun folder of a sweep, e.g. sweep_dir=multirun/<date>/<time>"
        )
    return path


def check_report_arguments(cfg: DictConfig) -> None:
    """``sweep_dir`` and ``task.extra_sweep_dirs`` are folders; ``paper_results`` (if given) a file."""
    root = OmegaConf.select(cfg, "paths.root_dir", default=None)
    _folder("sweep_dir", cfg.sweep_dir, root)
    for extra in OmegaConf.select(cfg, "task.extra_sweep_dirs", default=None) or []:
        _folder("task.extra_sweep_dirs", extra, root)
    paper = OmegaConf.select(cfg, "paper_results", default=None)
    if paper and not user_path(paper, root).is_file():
        raise ConfigError(
            f"paper_results={paper}: no such file; give the paper's all_mean_mean_results.csv "
            "or leave paper_results out"
        )


def check_bias_test(node: DictConfig, key: str, cache_dir=None) -> None:
    """The bias test's manifest exists and every clip it lists exists and decodes, with at least
    :data:`MIN_CLIPS_PER_ROLE` clips per role; or a builder will write it from corpus folders that exist."""
    manifest = OmegaConf.select(node, "manifest", default=None)
    has_builder = OmegaConf.select(node, "builder", default=None) is not None
    if manifest is None:
        return
    path = Path(str(manifest)).expanduser()
    if not path.is_file():
        if has_builder:
            check_corpus_folders(node, key)
            return
        raise ConfigError(
            f"{key}.manifest={manifest}: no such file and no builder configured; give an existing "
            "manifest CSV (columns clip_id, path, role)"
        )
    root = OmegaConf.select(node, "root", default=None)
    root = Path(str(root)) if root else path.parent
    check_manifest_files(path, root, f"{key}.manifest")
    check_role_sizes(path, f"{key}.manifest")
    check_manifest_clips(path, root, f"{key}.manifest", Path(str(cache_dir)) / CLIP_CHECKS if cache_dir else None)


def _manifest_rows(path: Path, key: str) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{key}={path}: not a readable CSV ({exc})") from exc


def check_role_sizes(path: Path, key: str = "manifest") -> None:
    """At least :data:`MIN_CLIPS_PER_ROLE` clips of each role X, Y, A, B (SpEAT's effect size divides by
    a standard deviation over each role's clips)."""
    from speechbias.roles import ROLES

    counts = {role: 0 for role in ROLES}
    for row in _manifest_rows(path, key):
        role = (row.get("role") or "").strip()
        if role in counts:
            counts[role] += 1
    small = [f"{role}: {n}" for role, n in counts.items() if n < MIN_CLIPS_PER_ROLE]
    if small:
        raise ConfigError(
            f"{key}={path}: too few clips per role ({', '.join(small)}); a bias test needs at least "
            f"{MIN_CLIPS_PER_ROLE} clips of each role {'/'.join(ROLES)}; add clips to the manifest"
        )


# clips already decoded by this process: (path, size, mtime_ns) -> problem or None (the entry points check
# a single run's config twice: before its folder is made and when it starts)
_CLIP_VERDICTS: dict[tuple[str, int, int], str | None] = {}


def _clip_problem(path: Path) -> str | None:
    """Why the clip at ``path`` cannot be used (audio.load_audio's reason), or None."""
    from speechbias.fileio.audio import AudioError, load_audio

    try:
        stat = path.stat()
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _CLIP_VERDICTS:
        try:
            load_audio(path)
            _CLIP_VERDICTS[key] = None
        except AudioError as exc:
            _CLIP_VERDICTS[key] = exc.problem
    return _CLIP_VERDICTS[key]


def _short(problem: str, limit: int = 110) -> str:
    """A clip's problem for a list: cut before a parenthesised detail when it is long."""
    if len(problem) <= limit:
        return problem
    cut = problem.rfind(" (", 0, limit)
    return problem[:cut] if cut > 20 else problem[:limit] + "..."


def _clips_checked_marker(clips: list[Path], verdict_dir: Path) -> Path:
    """The file that records that these clips, with these sizes and mtimes, all passed the check."""
    import hashlib
    import json

    stats = []
    for clip in clips:
        try:
            st = clip.stat()
            stats.append([str(clip), st.st_size, st.st_mtime_ns])
        except OSError:
            stats.append([str(clip), None, None])
    return verdict_dir / (hashlib.sha256(json.dumps(stats).encode()).hexdigest() + ".ok")


def check_manifest_clips(path: Path, root: Path, key: str = "manifest", verdict_dir: Path | None = None) -> None:
    """Every clip of the manifest decodes as a stimulus (readable, not truncated, not empty, silent or
    NaN; :func:`speechbias.fileio.audio.load_audio`'s checks), so bad files are found before any model loads,
    all in one error: their count and the first few with their reasons.

    ``verdict_dir`` (the cache's ``clip_checks/``): a manifest whose clips all passed with the same sizes
    and mtimes is not decoded again, so the jobs of a sweep over one test decode its clips once.
    """
    from concurrent.futures import ThreadPoolExecutor

    clips = [root / (row.get("path") or "").strip() for row in _manifest_rows(path, key)]
    marker = _clips_checked_marker(clips, verdict_dir) if verdict_dir is not None else None
    if marker is not None and marker.is_file():
        return
    with ThreadPoolExecutor(max_workers=4) as pool:  # decoding releases the GIL
        problems = [(clip, problem) for clip, problem in zip(clips, pool.map(_clip_problem, clips)) if problem]
    if problems:
        shown = "; ".join(f"{clip}: {_short(problem)}" for clip, problem in problems[:MAX_LISTED])
        more = f"; ... ({len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise ConfigError(
            f"{key}={path}: {len(problems)} of {len(clips)} clips cannot be used: {shown}{more}; "
            "fix or replace those files, or drop their rows"
        )
    if marker is not None:
        from speechbias.fileio.atomic_file import atomic_write

        try:
            atomic_write(marker, lambda tmp: tmp.write_text(str(path)))
        except OSError:  # only a shortcut for the next run
            pass


def check_corpus_folders(node: DictConfig, key: str) -> None:
    """A corpus-built test (manifest not built yet): ``paths.data_root`` and the folders of the corpora its
    recipe reads exist (and ``paper_lists_dir`` for ``selection=paper``)."""
    builder = node.builder
    test = str(OmegaConf.select(builder, "test", default="") or "")
    data_root = OmegaConf.select(builder, "data_root", default=None)
    from speechbias.stimuli.registry import RECIPES
    from speechbias.stimuli.selection.sources import CORPUS_DIRS

    recipe = RECIPES.get(test)
    if recipe is None:
        return  # the builder names its own error
    if OmegaConf.select(builder, "selection", default="ours") == "paper":
        lists = OmegaConf.select(builder, "paper_lists_dir", default=None)
        if lists and not Path(str(lists)).expanduser().is_dir():
            raise ConfigError(
                f"{key}.builder.paper_lists_dir={lists}: no such folder; give the SpEAT authors' "
                "data/ folder (selection.paper_lists_dir=...)"
            )
    overrides = OmegaConf.to_container(builder.corpus_dirs) if builder.get("corpus_dirs") else {}
    dirs = {**CORPUS_DIRS, **(overrides or {})}
    corpora = list(dict.fromkeys([*recipe.corpora, recipe.attributes.corpus]))
    root = Path(str(data_root)).expanduser() if data_root else None
    folders = [(c, Path(dirs[c]) if Path(dirs[c]).is_absolute() or root is None else root / dirs[c]) for c in corpora]
    missing = [f"{folder} ({corpus})" for corpus, folder in folders if not folder.is_dir()]
    if not missing:
        return
    fix = f"set paths.data_root=... (or SPEECHBIAS_DATA) to the folder that holds them; layout: {CORPUS_LAYOUT}"
    if root is not None and not root.is_dir():
        raise ConfigError(
            f"paths.data_root={data_root}: no such folder; {key}={test} builds its stimuli from "
            f"{', '.join(dirs[c] for c in corpora)} there; {fix}"
        )
    raise ConfigError(f"{key}={test}: corpus folder(s) not found: {', '.join(missing)}; {fix}")


def check_writable_folder(folder, key: str, create: bool = True, fix: str | None = None) -> None:
    """``folder`` takes a new file (``create``: made if missing; else its nearest existing parent must
    take one); else one line naming it and the reason (read-only, disk full, not a folder, ...)."""
    if not folder:
        return
    import tempfile

    path = Path(str(folder)).expanduser()
    probe = path
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        else:
            while not probe.exists() and probe.parent != probe:
                probe = probe.parent
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = "" if probe == path else f" (in {probe})"
        raise ConfigError(
            f"{key}={folder}: cannot write there{where} ({reason}); "
            f"{fix or f'give a writable folder, e.g. {key}=/tmp/speechbias'}"
        ) from exc


def check_spoken_stereoset_data(cfg: DictConfig) -> None:
    """``task.data_dir`` holds the metadata CSV of each domain (``metadata/<domain>_<version>.csv``)."""
    data_dir = OmegaConf.select(cfg, "task.data_dir", default=None)
    if not data_dir:
        return
    folder = Path(str(data_dir)).expanduser()
    layout = "metadata/<domain>_<version>.csv and speech/<domain>/<id>_<speaker>.wav"
    if not folder.is_dir():
        raise ConfigError(
            f"task.data_dir={data_dir}: no such folder; give the Spoken StereoSet folder ({layout}), "
            "see experiments/spoken_stereoset_2024/README.md"
        )
    version = OmegaConf.select(cfg, "task.version", default="v1.0")
    domains = OmegaConf.select(cfg, "task.domains", default=None) or []
    missing = [
        f"metadata/{d}_{version}.csv" for d in domains if not (folder / "metadata" / f"{d}_{version}.csv").is_file()
    ]
    if missing:
        raise ConfigError(
            f"task.data_dir={data_dir}: {', '.join(missing)} not found; expected the layout {layout} "
            "(or choose task.domains=... / task.version=...)"
        )


def check_manifest_files(path: Path, root: Path, key: str = "manifest") -> None:
    """Every row's ``path`` (relative ones against ``root``) is an existing file; names the rows."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if "path" not in (reader.fieldnames or []):
                raise ConfigError(
                    f"{key}={path}: no 'path' column (has {reader.fieldnames}); a manifest needs "
                    "columns clip_id, path, role"
                )
            missing = [
                (i, row["path"])
                for i, row in enumerate(reader, start=2)
                if not (root / (row["path"] or "").strip()).is_file()
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{key}={path}: not a readable CSV ({exc})") from exc
    if missing:
        rows = ", ".join(str(i) for i, _ in missing[:MAX_LISTED]) + (" ..." if len(missing) > MAX_LISTED else "")
        raise ConfigError(
            f"{key}={path}: {len(missing)} audio file(s) not found, e.g. {missing[0][1]} "
            f"(row(s) {rows}); fix the path column or the files"
        )


def check_valence_source(cfg: DictConfig) -> None:
    """A valence set read from a corpus folder (``ser_data.source.root``, e.g. MESS under ``paths.data_root``):
    that folder exists; one read from one ratings CSV: that file exists."""
    root = OmegaConf.select(cfg, "ser_data.source.root", default=None)
    if root and not Path(str(root)).expanduser().is_dir():
        raise ConfigError(
            f"ser_data.source.root={root}: no such folder; set paths.data_root=... (or SPEECHBIAS_DATA) "
            f"to the folder that holds the {OmegaConf.select(cfg, 'ser_data.name', default='valence')} "
            f"corpus (layout: {CORPUS_LAYOUT})"
        )
    ratings = OmegaConf.select(cfg, "ser_data.source.ratings", default=None)
    if ratings and not Path(str(ratings)).expanduser().is_file():
        raise ConfigError(
            f"ser_data.source.ratings={ratings}: no such file; give the valence ratings CSV "
            "(clip_id, path, speaker, valence) or choose another ser_data"
        )


def check_propagation_tests(cfg: DictConfig) -> None:
    """``bias_tests`` of train.py name existing ``conf/bias_test/*.yaml`` files whose manifests check out."""
    entries = cfg.get("bias_tests") or []
    if not isinstance(entries, (list, ListConfig)):
        raise ConfigError(
            f"bias_tests={entries}: give a list of bias test names, e.g. 'bias_tests=[demo_voice,demo_accent]'"
        )
    primary = primary_config_dir(cfg)
    folder = Path(primary) if primary else None
    for entry in entries:
        if not isinstance(entry, str):
            continue
        if folder is None:
            return
        try:
            node = bias_test_config(entry, folder)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        scoped = OmegaConf.merge({"paths": cfg.paths, "seed": cfg.get("seed", 0)}, {"bias_test": node})
        check_bias_test(
            scoped.bias_test, f"bias_tests[{entry}]", OmegaConf.select(cfg, "paths.cache_dir", default=None)
        )


class ConfigCheckCallback(Callback):
    """Hydra callback (``hydra.callbacks`` of the entry configs): checks a single run's config before
    Hydra creates its output folder; a bad value prints one line and exits 1."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        global _checked_by_callback
        _checked_by_callback = None
        try:
            check_config(config)
            run_dir = OmegaConf.select(config, "hydra.run.dir", default=None)
            check_writable_folder(
                run_dir,
                "hydra.run.dir",
                create=False,
                fix="give a writable folder: paths.output_root=... or hydra.run.dir=...",
            )
            _checked_by_callback = job_config_text(config)  # the job need not check it again
        except ConfigError as exc:
            if full_error_requested():
                raise
            print(error_line(exc), file=sys.stderr)
            sys.exit(1)


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """The override arguments of an entry point's command line (``key=value``, ``+key=value``, ``~key``),
    without Hydra's flags (``-m``, ``--cfg job``, ...)."""
    return [a for a in argv if not a.startswith("-") and ("=" in a or a.startswith("~"))]


def _option_names(value) -> list[str]:
    """The option names an override's value chooses: one name, or each of a sweep's ``a,b`` /
    ``choice(a,b)``; none for ``glob(...)``, ``null`` and non-string values."""
    from hydra.core.override_parser.types import ChoiceSweep

    items = value.list if isinstance(value, ChoiceSweep) else [value]
    return [str(v) for v in items if isinstance(v, str)]


def unknown_option(group: str, name: str, options: list[str]) -> ConfigError:
    """``<group>=<name>: no such option in conf/<group>/; close matches: a, b (or N options: ...)``."""
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    if close:
        hint = f"did you mean {' or '.join(close)}?"
    else:
        shown = ", ".join(options[:6]) + (", ..." if len(options) > 6 else "")
        hint = f"{len(options)} options: {shown}"
    return ConfigError(f"{group}={name}: no such option of config group {group}; {hint}")


def check_group_options(overrides: Sequence[str], config_dir: str | Path) -> None:
    """Every config group option named on the command line exists (``upstream=...``, ``bias_test=a,b``,
    ``aggregation=...``, ``hydra/launcher=...``); else :class:`ConfigError` naming the close matches
    (difflib) instead of Hydra's list of every option. The options are those Hydra's own loader finds
    for ``config_dir`` (YAML files and the ConfigStore)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:
        return  # a malformed override: Hydra's own message names it
    wanted = [
        (o.key_or_group, _option_names(o.value())) for o in parsed if not o.is_delete() and "." not in o.key_or_group
    ]
    wanted = [(group, names) for group, names in wanted if names]
    if not wanted:
        return
    with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        for group, names in wanted:
            if not loader.repository.group_exists(group):
                continue  # a plain value such as lr=1e-4
            options = loader.get_group_options(group)
            for name in names:
                if name not in options:
                    raise unknown_option(group, name, options)


def check_command_line(config_dir: str | Path, argv: Sequence[str] | None = None) -> None:
    """The entry points' check before ``@hydra.main``: an unknown config group option prints one line
    (``error: ... (HYDRA_FULL_ERROR=1 shows the traceback)``) and exits 1. Left to Hydra with
    ``HYDRA_FULL_ERROR=1`` and when the command line names another config folder or name."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if full_error_requested() or any(a.split("=", 1)[0] in OTHER_CONFIG_FLAGS for a in argv):
        return
    try:
        check_group_options(command_line_overrides(argv), config_dir)
    except ConfigError as exc:
        print(error_line(exc), file=sys.stderr)
        sys.exit(1)
