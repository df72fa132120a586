"""The ASR disparity task's config checks (``task=wer_disparity``): its settings, an ASR model and a corpus
are chosen, and a corpus read from one table (``corpus.load.manifest``) has the columns its keys name."""

from __future__ import annotations

import difflib
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.tasks.input_checks import check_cache_folder, csv_header
from speechbias.tasks.wer_disparity_settings import SETTINGS as SETTINGS, TASK_SETTINGS as TASK_SETTINGS  # launch/'s


def check_config(cfg: DictConfig) -> None:
    """After its settings (``SETTINGS``: ``task.*``, ``task.glmm.*``, ``corpus.*``), built by the config checks:
    the cache folder takes files; ``asr`` and ``corpus`` are given."""
    check_cache_folder(cfg)
    for group in ("asr", "corpus"):
        if OmegaConf.select(cfg, group, default=None) is None:
            raise ConfigError(
                f"{group}: required by task=wer_disparity, e.g. python evaluate.py "
                "task=wer_disparity asr=whisper_small corpus=fair_speech"
            )
    check_categories(cfg)
    check_covariates(cfg)
    check_corpus_table(cfg)


def check_categories(cfg: DictConfig) -> None:
    """``task.categories`` (null: all) are among the corpus's categories."""
    wanted = OmegaConf.select(cfg, "task.categories", default=None) or []
    for key in ("corpus.load.category_columns", "corpus.load.categories"):
        known = OmegaConf.select(cfg, key, default=None)
        for category in wanted if known is not None else []:
            if category not in known:
                raise ConfigError(f"task.categories={category}: not one of {key}: {', '.join(map(str, known))}")


# the keys of corpus.load that name one column of its table (load_asr_manifest's arguments)
COLUMN_KEYS = ("path_column", "transcript_column", "id_column", "speaker_column")


def check_corpus_table(cfg: DictConfig) -> None:
    """``corpus.load.root`` (a corpus's folder, or where a table's relative audio paths are) exists; a corpus
    read from one table (``corpus.load.manifest``, asr.corpora.load_asr_manifest): the file exists and every
    column a key names is in its header (csv module: no pandas)."""
    root = OmegaConf.select(cfg, "corpus.load.root", default=None)
    if root and not Path(str(root)).expanduser().is_dir():
        raise ConfigError(
            f"corpus.load.root={root}: no such folder; set paths.data_root=... (or corpus.load.root=...) "
            "to the folder that holds the corpus"
        )
    manifest = OmegaConf.select(cfg, "corpus.load.manifest", default=None)
    if not manifest:
        return
    load = OmegaConf.select(cfg, "corpus.load")
    path = Path(str(manifest)).expanduser()
    if not path.is_file():
        raise ConfigError(f"corpus.load.manifest={manifest}: no such file; give the utterance table (CSV or TSV)")
    header = table_header(load, path)
    named = [(f"corpus.load.{key}", load.get(key)) for key in COLUMN_KEYS]
    named += [("corpus.load.category_columns", c) for c in load.get("category_columns") or []]
    for key, column in named:
        if column and column not in header:
            close = difflib.get_close_matches(str(column), header, 1)
            hint = f"did you mean {close[0]}?" if close else f"its columns: {', '.join(header)}"
            raise ConfigError(f"{key}={column}: no such column in {manifest}; {hint}")


def table_header(load: DictConfig, path: Path) -> list[str]:
    """The header of the corpus table ``path`` (``corpus.load.sep``; null: tab for .tsv/.tab, else comma)."""
    sep = load.get("sep") or ("\t" if path.suffix.lower() in (".tsv", ".tab") else ",")
    typed = f"corpus.load.manifest={load.get('manifest')}"
    return csv_header(path, typed, "give the utterance table (CSV or TSV)", sep)


def check_covariates(cfg: DictConfig) -> None:
    """``task.glmm.covariates`` are columns of the scored utterance table the WER model is fitted on (else
    every category's model is left unfitted, in a note, after transcribing): the corpus's categories,
    ``speaker`` (with ``corpus.load.speaker_column``) and the rest of ``utterances.csv``'s columns
    (:data:`speechbias.asr.report.UTTERANCE_COLUMNS`: id, path, texts, error counts). Known from the config;
    a column of the corpus table (``corpus.load.manifest``'s header) that the utterance table does not keep
    is named as such."""
    wanted = OmegaConf.select(cfg, "task.glmm.covariates", default=None) or []
    if not wanted:
        return
    from speechbias.asr.report import UTTERANCE_COLUMNS  # the scored table's columns (utterances.csv's)

    load = OmegaConf.select(cfg, "corpus.load")
    categories = [str(c) for c in load.get("category_columns") or load.get("categories") or []]
    speaker = ["speaker"] if load.get("speaker_column") else []
    known = [*categories, *speaker, *(c for c in UTTERANCE_COLUMNS if c != "speaker")]
    for column in wanted:
        if column in known:
            continue
        typed, columns = f"task.glmm.covariates={column}", f"its columns: {', '.join(known)}"
        manifest = Path(str(load.get("manifest") or "")).expanduser()
        if load.get("manifest") and manifest.is_file() and column in table_header(load, manifest):
            raise ConfigError(
                f"{typed}: a column of {load.manifest} that the scored utterance table does not keep (only "
                f"corpus.load.category_columns); {columns}"
            )
        close = difflib.get_close_matches(str(column), known, 1)
        hint = f"did you mean {close[0]}?" if close else columns
        raise ConfigError(f"{typed}: no such column of the scored utterance table; {hint}")
