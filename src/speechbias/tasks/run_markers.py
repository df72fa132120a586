"""Whether a run folder already holds this run's results: the one skip-if-finished check of every task.

A run folder is finished when its task's marker files exist (every task writes them last), the run's
digest (``run_digest.json``, written last, when a run completes) is there, and every output file it
records (name, size, sha256: every file the run wrote into its folder but the bookkeeping of
:data:`NOT_OUTPUTS`) is still there with that content. A file missing, emptied, cut short or changed
gets one line naming it (``results.csv missing; recomputing``) and the run is recomputed. The digest is what determines
the results: the resolved config without presentation keys (:data:`PRESENTATION_KEYS`: where outputs go,
the logger, progress bars, ``force``, ...), the package version, and where it is cheap the upstream's
identity (the hub commit of a cached hub id, the weight files of a local folder), the sha256 of the
bias test's manifest and the decoded-audio sha256 of every clip the run reads (``clips``, as the audio
index knows it: :mod:`speechbias.tasks.clip_identity`; a changed clip is named). A finished folder is reused only when its digest matches the new run's; otherwise
one line names the keys that changed and the run is recomputed into the folder.

Light on purpose (no pandas, torch): the entry points call :func:`finished_results` before anything heavy
is imported, so a resumed sweep skips in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias import __version__
from speechbias.fileio.atomic_file import atomic_write
from speechbias.result_neutral_keys import digest_excluded_keys, digest_included_keys

log = logging.getLogger(__name__)

# the files of a finished run per task (a task writes the first one last); results.json unless listed
FINISHED_MARKERS = {"spoken_stereoset": ("summary.json", "results.csv")}
# tasks that always run (the sweep report is rewritten from whatever the sweep holds now)
NEVER_SKIPPED = {"report"}
RUN_DIGEST_FILE = "run_digest.json"
# a run's checkpoints (train.py: last.ckpt, best.ckpt) and the digest of the config that wrote them (beside the
# folder: Lightning warns about a checkpoint folder that holds anything before it writes)
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_DIGEST_FILE = "checkpoint_digest.json"
CHECKPOINTING_TASKS = {"train_ser"}
# config keys (and everything below them) that do not change a run's results: the one list of
# speechbias.result_neutral_keys (also what conf/sweep/folders.yaml leaves out of job folder names)
PRESENTATION_KEYS = digest_excluded_keys()
MAX_NAMED_KEYS = 4
# files of a run folder that are not its results (rewritten by every run, or written after the digest):
# not recorded in the digest, not verified; hidden files (temporary names) and subfolders neither
NOT_OUTPUTS = frozenset(
    {
        RUN_DIGEST_FILE,
        CHECKPOINT_DIGEST_FILE,
        "job_status.json",  # speechbias.results.job_status: the job's status, written after the digest
        "config.yaml",  # the entry point's copy of the config, rewritten by every run
        "tracker_log.jsonl",  # report.run_writer.TRACKER_LOG: cleared when a run's writer is built
        "wandb_run_id",  # report.wandb_run.RUN_ID_FILE: the job's W&B run, kept across resumes
    }
)
NOT_OUTPUT_SUFFIXES = (".log",)  # Hydra's job log, appended by every run
HASH_CHUNK = 1 << 20


# keys below a presentation key that do change the results (the trainer's numeric precision)
RESULT_KEYS_UNDER_PRESENTATION = digest_included_keys()


def _under(key: str, prefixes) -> bool:
    return any(key == p or key.startswith(p + ".") or key.startswith(p + "[") for p in prefixes)


def _presentation(key: str) -> bool:
    return _under(key, PRESENTATION_KEYS) and not _under(key, RESULT_KEYS_UNDER_PRESENTATION)


def config_values(cfg: DictConfig | dict, only: tuple[str, ...] | None = None) -> dict[str, str]:
    """The resolved config as ``{dotted key: JSON of the value}``, presentation keys left out. A value
    that cannot be resolved here (an interpolation only a running app can fill) is kept as written.
    ``cfg``: a DictConfig (a value a resolver gives as a list or dict is one value), or a config resolved to
    plain dicts and lists (``OmegaConf.to_container(cfg, resolve=True)``; the values of the DictConfig
    ``OmegaConf.create`` makes of it).

    ``only``: the values at and below these dotted keys alone (none of ``cfg``'s others is walked): the
    values of a config that differs from an already walked one only there are the walked ones without
    the keys under ``only`` (:func:`without_keys`) and these (a SpEAT list job's pairs, ~15 ms a walk).
    """
    flat: dict[str, str] = {}
    mapping, sequence_type = (DictConfig, ListConfig) if isinstance(cfg, DictConfig) else (dict, list)

    def wanted(full: str) -> bool:
        return only is None or any(_under(full, (o,)) or o.startswith(full + ".") for o in only)

    def walk(node, prefix: str) -> None:
        sequence = isinstance(node, sequence_type)
        items = [(f"[{i}]", i) for i in range(len(node))] if sequence else [(str(k), k) for k in node.keys()]
        if not items:
            flat[prefix] = "[]" if sequence else "{}"
        for name, key in items:
            full = f"{prefix}{name}" if name.startswith("[") else (f"{prefix}.{name}" if prefix else name)
            if not wanted(full):
                continue
            if _presentation(full) and not any(r.startswith(full + ".") for r in RESULT_KEYS_UNDER_PRESENTATION):
                continue
            try:
                child = node[key]
            except Exception:  # noqa: BLE001 - any resolution error: keep the value as written
                flat[full] = json.dumps(str(OmegaConf.to_container(node, resolve=False)[key]))
                continue
            if isinstance(child, (mapping, sequence_type)):
                walk(child, full)
            else:
                flat[full] = json.dumps(child, sort_keys=True, default=str)

    walk(cfg, "")
    return flat


def without_keys(values: dict[str, str], keys: tuple[str, ...]) -> dict[str, str]:
    """``values`` (of :func:`config_values`) without those at and below ``keys``."""
    return {k: v for k, v in values.items() if not _under(k, keys)}


def model_identity(values: dict[str, str]) -> dict[str, object]:
    """Cheap identity of the models the config names (``<group>.model_id`` keys): ``<group>.weights``, the
    weight files (names, sizes, mtimes) of a local folder, else ``<group>.commit``, the commit its revision
    points at in the local Hugging Face cache (None before the first download)."""
    from speechbias.model_loading import cached_commit, local_weights_digest

    identity: dict[str, object] = {}
    for key, raw in values.items():
        if not key.endswith(".model_id") or key.startswith("task.run.") or key.count(".") != 1:
            continue
        model_id = json.loads(raw)
        if not isinstance(model_id, str) or not model_id:
            continue
        group = key.rsplit(".", 1)[0]
        folder = Path(model_id).expanduser()
        try:
            if folder.is_dir():
                identity[f"{group}.weights"] = local_weights_digest(folder)
            else:
                revision = json.loads(values.get(f"{group}.revision", "null"))
                cache = json.loads(values.get(f"{group}.cache_dir", "null"))
                identity[f"{group}.commit"] = cached_commit(model_id, revision, cache)
        except (OSError, ValueError) as exc:  # an unreadable folder or an id the hub cannot hold
            identity[f"{group}.commit"] = f"unknown ({type(exc).__name__})"
    return identity


def run_identity(cfg: DictConfig | None, values: dict[str, str] | None = None) -> dict:
    """What determines a run's results: its config values, the package version and statistics layout, the identity of its
    models and of its bias test's manifest, and the decoded-audio sha256 of every clip it reads
    (``clips``, :func:`speechbias.tasks.clip_identity.run_clips`, through the audio index under ``cfg``'s
    ``paths.cache_dir``). ``values``: ``cfg``'s :func:`config_values` when the caller has them already."""
    values = config_values(cfg) if values is None else values
    return {"values": values, **identity_beyond_values(cfg, values)}


def identity_beyond_values(cfg: DictConfig | None, values: dict[str, str], cache_dir: str | Path | None = None) -> dict:
    """A run identity's ``extra`` and ``clips`` (:func:`run_identity`): they are read from the model,
    manifest and clip keys of ``values`` (``<group>.model_id``/``revision``/``cache_dir``, ``bias_test.*``,
    ``task.run.bias_tests.entries``, ``bias_tests``, ``ser_data.source.ratings``), so the pairs of a list
    job that share a test share them (the pairs differ in their aggregation and folder only)."""
    from speechbias.tasks.clip_identity import run_clips

    if cache_dir is None and cfg is not None:
        cache_dir = OmegaConf.select(cfg, "paths.cache_dir", default=None)
    from speechbias.stats.permutation import STATISTICS_LAYOUT

    # the statistics layout decides how a sampled p is drawn: a run of another layout is computed again
    extra: dict[str, object] = {
        "speechbias.version": __version__,
        "speechbias.statistics_layout": STATISTICS_LAYOUT,
        **model_identity(values),
    }
    manifest = json.loads(values.get("bias_test.manifest", "null"))
    if isinstance(manifest, str):
        try:
            extra["bias_test.manifest.sha256"] = file_fingerprint(Path(manifest).expanduser())["sha256"]
        except OSError:
            extra["bias_test.manifest.sha256"] = None
    return {
        "extra": {k: json.dumps(v, sort_keys=True, default=str) for k, v in extra.items()},
        "clips": run_clips(cfg, values, cache_dir),
    }


def identity_digest(identity: dict) -> str:
    """sha256 hex of an identity's canonical JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def write_digest(path: Path, identity: dict, files: dict | None = None) -> Path:
    """Write ``identity`` and its digest (``{"digest": ..., "values": ..., "extra": ...}``) to ``path``;
    ``files`` (:func:`output_files`), when given, is kept beside them (not part of the digest)."""
    record = {"digest": identity_digest(identity), **identity}
    if files is not None:
        record["files"] = files
    text = json.dumps(record, indent=1, sort_keys=True)
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _is_output(path: Path) -> bool:
    name = path.name
    return not (name.startswith(".") or name in NOT_OUTPUTS or name.endswith(NOT_OUTPUT_SUFFIXES))


def file_fingerprint(path: Path) -> dict:
    """``{"size": bytes, "sha256": hex}`` of a file's content (read in 1 MiB chunks)."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            sha.update(chunk)
    return {"size": path.stat().st_size, "sha256": sha.hexdigest()}


def output_files(output_dir: str | Path) -> dict[str, dict]:
    """``{file name: file_fingerprint}`` of every output file of a run folder (its top-level regular
    files but :data:`NOT_OUTPUTS`: a run writes its results only at the top of its folder)."""
    return {
        p.name: file_fingerprint(p)
        for p in sorted(Path(output_dir).iterdir())
        if p.is_file() and not p.is_symlink() and _is_output(p)
    }


def output_problem(output_dir: str | Path, files: dict[str, dict]) -> str | None:
    """What is wrong with the first recorded output file that does not verify (``results.csv missing``,
    ``results.json empty``, ``results.json cut short (258 of 516 bytes)``, ``layers.csv changed since
    the run wrote it``), or None when every one is there with its recorded size and sha256."""
    for name, want in sorted(files.items()):
        path = Path(output_dir) / name
        try:
            size = path.stat().st_size
            if not path.is_file():
                return f"{name} is not a file"
            if size != want.get("size"):
                if size == 0:
                    return f"{name} empty"
                if size < int(want.get("size") or 0):
                    return f"{name} cut short ({size} of {want['size']} bytes)"
                return f"{name} changed since the run wrote it ({size} bytes, not {want.get('size')})"
            if file_fingerprint(path)["sha256"] != want.get("sha256"):
                return f"{name} changed since the run wrote it (another sha256)"
        except FileNotFoundError:
            return f"{name} missing"
        except OSError as exc:
            return f"{name} unreadable ({exc.strerror or type(exc).__name__})"
    return None


def _outputs_verified(output_dir: Path, record: dict | None) -> bool:
    """Whether the output files ``record`` lists verify (a record without them, of an older version:
    yes); if not, one line naming the file and why, and the digest is removed (the run recomputes)."""
    files = (record or {}).get("files")
    problem = output_problem(output_dir, files) if isinstance(files, dict) else None
    if problem is None:
        return True
    log.warning("%s/%s; recomputing", output_dir, problem)
    (output_dir / RUN_DIGEST_FILE).unlink(missing_ok=True)
    return False


def read_digest(path: Path) -> dict | None:
    """The record :func:`write_digest` wrote at ``path``; None when it is missing, unreadable or not of its
    shape (a folder is untrusted input: an object whose parts are objects, each file's record an object, each
    value, extra and clip a string or null)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("digest", ""), str):
        return None
    parts = [record.get(k, {}) for k in ("values", "extra", "clips", "files")]
    if not all(isinstance(part, dict) for part in parts) or not all(isinstance(f, dict) for f in parts[3].values()):
        return None
    if not all(isinstance(v, (str, type(None))) for part in parts[:3] for v in part.values()):
        return None
    return record


def record_run_digest(
    cfg: DictConfig | None,
    output_dir: str | Path,
    values: dict[str, str] | None = None,
    beyond_values: dict | None = None,
) -> Path:
    """Write ``run_digest.json`` (digest + what it was computed from + every output file's size and
    sha256) into a completed run's folder, last (atomically: a run killed before has none). ``values``:
    ``cfg``'s :func:`config_values` when the caller has them already. ``beyond_values``: the identity's
    :func:`identity_beyond_values` when the caller has them for these values (a list job's pairs of one test;
    ``cfg`` is then not needed)."""
    if beyond_values is None:
        identity = run_identity(cfg, values)
    else:
        identity = {"values": config_values(cfg) if values is None else values, **beyond_values}
    return write_digest(Path(output_dir) / RUN_DIGEST_FILE, identity, output_files(output_dir))


def changed_keys(old: dict, new: dict) -> list[str]:
    """Keys whose value differs between two identities (config keys first; the task object's own copies
    of config values, ``task.run.*``, only when nothing else changed)."""
    keys = []
    for part in ("values", "extra", "clips"):
        a, b = old.get(part, {}), new.get(part, {})
        keys += sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    outer = [k for k in keys if not k.startswith("task.run.")]
    return outer or keys


def _shown(value: str | None) -> str:
    if value is None:
        return "unset"
    text = str(json.loads(value)) if value.startswith('"') else value
    return text if len(text) <= 40 else text[:37] + "..."


def describe_change(old: dict, new: dict) -> str:
    """``aggregation.layer: sum -> q3, speat.n_permutations: 1000 -> 2000 (+2 more)``."""
    if "clips" not in old and new.get("clips"):  # a digest of a version before clips: not 'every clip added'
        old = {**old, "clips": new["clips"]}
        note = ["clips not recorded (a digest of an earlier version)"]
    else:
        note = []
    keys = changed_keys(old, new)
    merged_old = {**old.get("values", {}), **old.get("extra", {})}
    merged_new = {**new.get("values", {}), **new.get("extra", {})}
    clips_old, clips_new = old.get("clips", {}), new.get("clips", {})

    def named_key(k: str) -> str:
        if k in merged_old or k in merged_new:
            return f"{k}: {_shown(merged_old.get(k))} -> {_shown(merged_new.get(k))}"
        if k not in clips_old:
            return f"clip {k} added"
        if k not in clips_new:
            return f"clip {k} no longer read"
        return f"clip {k} changed (audio sha256 {clips_old[k][:12]} -> {clips_new[k][:12]})"

    named = note + [named_key(k) for k in keys[:MAX_NAMED_KEYS]]
    more = f" (+{len(keys) - MAX_NAMED_KEYS} more)" if len(keys) > MAX_NAMED_KEYS else ""
    return ", ".join(named) + more


def result_rows(marker: str | Path) -> list[dict]:
    """The rows a finished run's ``results.json`` holds, as written (every float at full precision)."""
    return json.loads(Path(marker).read_text(encoding="utf-8"))


def finished_marker(task: str, output_dir: str | Path, force: bool = False) -> Path | None:
    """The first marker file of a finished ``task`` run in ``output_dir`` when the run digest exists,
    every output file it records verifies and all markers exist, and ``force`` is off, else None (the
    check a task object makes with its own name and folder; whether the digest matches this run's config
    is :func:`finished_results`' question). An output that does not verify: one line naming it."""
    if task in NEVER_SKIPPED or force:
        return None
    output_dir = Path(output_dir)
    record = read_digest(output_dir / RUN_DIGEST_FILE)
    if record is None or not _outputs_verified(output_dir, record):
        return None
    markers = [output_dir / m for m in FINISHED_MARKERS.get(task, ("results.json",))]
    return markers[0] if all(m.is_file() for m in markers) else None


def finished_results(cfg: DictConfig, output_dir: str | Path, values: dict[str, str] | None = None) -> Path | None:
    """The marker of ``output_dir`` when it holds this run's finished results (:func:`finished_marker`
    of the task named in ``cfg``: every recorded output verifies, and a digest equal to ``cfg``'s;
    ``values``: the run's :func:`config_values` when the caller has them, ``cfg`` then names the task).
    Finished results of another config (or without a digest) get one line saying what changed, an
    output that does not verify one line naming it; their digest is removed so the tasks recompute, and
    a run stopped before completing is never taken for finished."""
    task = str(OmegaConf.select(cfg, "task.name", default=""))
    force = bool(cfg.get("force", False))
    output_dir = Path(output_dir)
    markers = [output_dir / m for m in FINISHED_MARKERS.get(task, ("results.json",))]
    digest_file = output_dir / RUN_DIGEST_FILE
    old = read_digest(digest_file)
    recorded = isinstance((old or {}).get("files"), dict)
    if task in NEVER_SKIPPED or force or not (recorded or all(m.is_file() for m in markers)):
        return None
    new = run_identity(cfg, values)
    if old is not None and old.get("digest") == identity_digest(new):
        if finished_marker(task, output_dir) is None:
            return None  # an output missing or changed: named in one line, recomputed
        log.info("results already exist in %s for this config; skipping (force=true reruns)", output_dir)
        return markers[0]
    if old is None:
        log.warning(
            "results in %s have no run digest (an older version or an unfinished run wrote them); recomputing",
            output_dir,
        )
    else:
        keys = set(changed_keys(old, new))
        audio_only = "clips" in old and bool(keys) and keys <= set(old["clips"]) | set(new.get("clips", {}))
        log.warning(
            "results in %s were computed %s (%s); recomputing",
            output_dir,
            "from other audio" if audio_only else "with another config",
            describe_change(old, new) or "version or models",
        )
        digest_file.unlink(missing_ok=True)
    return None


def claim_checkpoints(cfg: DictConfig, output_dir: str | Path) -> None:
    """Make ``<output_dir>/checkpoints`` this config's before a run starts, so that a checkpoint is resumed
    only by the config that wrote it (the run digest of :func:`run_identity`, kept beside the folder in
    ``checkpoint_digest.json``). Checkpoints of another config, or without a digest (an older version), are moved
    aside to ``checkpoints.stale-<n>`` (nothing is deleted) with one line naming the changed keys, and the
    run starts fresh; then the folder records this config's digest. A run killed and rerun with the same
    config resumes where it stopped. Only rank zero calls it; the other ranks of a job whose ranks start
    together (a SLURM job of N tasks) wait for it (:func:`await_checkpoint_claim`)."""
    if str(OmegaConf.select(cfg, "task.name", default="")) not in CHECKPOINTING_TASKS:
        return
    folder = Path(output_dir) / CHECKPOINT_DIR
    digest_file = Path(output_dir) / CHECKPOINT_DIGEST_FILE
    new = run_identity(cfg)
    digest = identity_digest(new)
    if folder.is_dir() and any(folder.glob("*.ckpt")):
        old = read_digest(digest_file)
        if old is not None and old.get("digest") == digest:
            return  # this config's checkpoints: resumed
        stale = next(folder.with_name(f"{CHECKPOINT_DIR}.stale-{n}") for n in range(1, 10_000)
                     if not folder.with_name(f"{CHECKPOINT_DIR}.stale-{n}").exists())  # fmt: skip
        folder.rename(stale)
        why = "no digest (an older version wrote them)" if old is None else describe_change(old, new)
        log.warning("checkpoints in %s were written by another config (%s); starting fresh, they are kept in %s",
                    folder, why or "version or models", stale.name)  # fmt: skip
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    write_digest(digest_file, new)


def await_checkpoint_claim(cfg: DictConfig, output_dir: str | Path, timeout_s: float = 300.0) -> None:
    """On a rank other than zero of a job whose ranks start together: return once rank zero has made the
    checkpoints folder this config's (:func:`claim_checkpoints` writes the digest last, after moving stale
    checkpoints aside), so that every rank resumes from the same checkpoint or none does. Raises
    ``RuntimeError`` after ``timeout_s`` seconds (rank zero failed before its claim: srun ends the job)."""
    if str(OmegaConf.select(cfg, "task.name", default="")) not in CHECKPOINTING_TASKS:
        return
    digest = identity_digest(run_identity(cfg))
    digest_file = Path(output_dir) / CHECKPOINT_DIGEST_FILE
    deadline = time.monotonic() + timeout_s
    while (read_digest(digest_file) or {}).get("digest") != digest:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{digest_file}: rank 0 did not claim the job's checkpoints within {timeout_s:.0f} s")
        time.sleep(0.2)
