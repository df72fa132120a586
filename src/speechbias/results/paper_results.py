"""The SpEAT paper's published results table, read and mapped to this project's names.

Input layout: ``all_mean_mean_results.csv`` of the authors' repository (github.com/isaacOnline/SpEAT,
``plots/eats/test_results/``): one row per model x test with columns ``Test``, ``Target Dataset``,
``Speech Model``, ``SpEAT d``, ``SpEAT p``, ``Number of Target Embeddings per Group``, ... The
paper's model names (``hubert_xtralarge_ll60k``) map to hub ids (``facebook/hubert-xlarge-ll60k``) and
its (test, target dataset) pairs to this project's bias-test names through two mappings from the
report config (``conf/task/report.yaml``), so a run matches on ``model_id`` and ``test``
(:func:`speechbias.stats.sweep_analysis.compare_with_paper` puts a sweep's d beside it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

PAPER_COLUMNS = (
    "Test",
    "Target Dataset",
    "Speech Model",
    "SpEAT d",
    "SpEAT p",
    "Number of Target Embeddings per Group",
)


def load_paper_results(path: str | Path, models: Mapping[str, str], tests: Mapping[str, str]) -> pd.DataFrame:
    """The published table as ``model_id, paper_model, test, paper_d, paper_p, paper_n_targets``.

    ``models``: paper model name -> hub id. ``tests``: ``"<Test> | <Target Dataset>"`` or
    ``"<Target Dataset>"`` -> bias-test name (the first form wins). Rows whose model or test has no
    mapping are dropped. Raises ``ValueError`` naming the file when columns are missing.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"paper_results {path}: no such file")
    df = pd.read_csv(path)
    missing = [c for c in PAPER_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"paper_results {path}: missing column(s) {missing}; expected the layout of the "
            f"SpEAT paper's all_mean_mean_results.csv"
        )
    df = df.drop_duplicates()
    both = df["Test"].astype(str).str.strip() + " | " + df["Target Dataset"].astype(str).str.strip()
    by_target = df["Target Dataset"].astype(str).str.strip()
    test = both.map(lambda k: tests.get(k))
    test = test.where(test.notna(), by_target.map(lambda k: tests.get(k)))
    out = pd.DataFrame(
        {
            "model_id": df["Speech Model"].map(lambda m: models.get(str(m))),
            "paper_model": df["Speech Model"].astype(str),
            "test": test,
            "paper_d": pd.to_numeric(df["SpEAT d"], errors="coerce"),
            "paper_p": pd.to_numeric(df["SpEAT p"], errors="coerce"),
            "paper_n_targets": pd.to_numeric(df["Number of Target Embeddings per Group"], errors="coerce"),
        }
    )
    out = out.dropna(subset=["model_id", "test"]).reset_index(drop=True)
    dup = out.duplicated(["model_id", "test"], keep=False)
    if dup.any():
        raise ValueError(
            f"paper_results {path}: several rows map to the same (model, test): "
            f"{out.loc[dup, ['paper_model', 'test']].values.tolist()[:4]}; check the test mapping"
        )
    return out
