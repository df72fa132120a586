"""The SpEAT paper's published results table, and this sweep's d beside it.

Input layout: ``all_mean_mean_results.csv`` of the authors' repository (github.com/isaacOnline/SpEAT,
``plots/eats/test_results/``): one row per model x test with columns ``Test``, ``Target Dataset``,
``Speech Model``, ``SpEAT d``, ``SpEAT p``, ``Number of Target Embeddings per Group``, ... The
paper's model names (``hubert_xtralarge_ll60k``) map to hub ids (``facebook/hubert-xlarge-ll60k``) and
its (test, target dataset) pairs to this project's bias-test names through two mappings from the
report config (``conf/task/report.yaml``), so a run matches on ``model_id`` and ``test``.

Aggregation: the published file is temporal mean / layer mean. Cosine similarity ignores the scale
of a vector, and the layer sum is L x the layer mean, so ``mean_sum`` gives exactly the same d; the
comparison accepts any aggregation listed as equivalent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

PAPER_COLUMNS = ("Test", "Target Dataset", "Speech Model", "SpEAT d", "SpEAT p",
                 "Number of Target Embeddings per Group")


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
        raise ValueError(f"paper_results {path}: missing column(s) {missing}; expected the layout of the "
                         f"SpEAT paper's all_mean_mean_results.csv")
    df = df.drop_duplicates()
    both = df["Test"].astype(str).str.strip() + " | " + df["Target Dataset"].astype(str).str.strip()
    by_target = df["Target Dataset"].astype(str).str.strip()
    test = both.map(lambda k: tests.get(k))
    test = test.where(test.notna(), by_target.map(lambda k: tests.get(k)))
    out = pd.DataFrame({
        "model_id": df["Speech Model"].map(lambda m: models.get(str(m))),
        "paper_model": df["Speech Model"].astype(str),
        "test": test,
        "paper_d": pd.to_numeric(df["SpEAT d"], errors="coerce"),
        "paper_p": pd.to_numeric(df["SpEAT p"], errors="coerce"),
        "paper_n_targets": pd.to_numeric(df["Number of Target Embeddings per Group"], errors="coerce"),
    })
    out = out.dropna(subset=["model_id", "test"]).reset_index(drop=True)
    dup = out.duplicated(["model_id", "test"], keep=False)
    if dup.any():
        raise ValueError(f"paper_results {path}: several rows map to the same (model, test): "
                         f"{out.loc[dup, ['paper_model', 'test']].values.tolist()[:4]}; check the test mapping")
    return out


def compare_with_paper(speat: pd.DataFrame, paper: pd.DataFrame,
                       equivalent_aggregations: Sequence[str] = ("mean_mean", "mean_sum")) -> pd.DataFrame:
    """The paper's d beside this sweep's d for every (model, test) both have.

    ``speat``: the sweep's SpEAT table (``model_id``, ``upstream``, ``test``, ``aggregation``, ``d``, ``p``).
    Only runs with an aggregation in ``equivalent_aggregations`` count; when a (model, test) has
    several, the first in that list is used. Columns: ``upstream, model_id, paper_model, test,
    aggregation, d, paper_d, d_minus_paper, p, paper_p, n_x, paper_n_targets, same_sign``.
    """
    cols = ["upstream", "model_id", "paper_model", "test", "aggregation", "d", "paper_d", "d_minus_paper",
            "p", "paper_p", "n_x", "paper_n_targets", "same_sign"]
    if speat.empty or paper.empty or "model_id" not in speat.columns:
        return pd.DataFrame(columns=cols)
    rank = {a: i for i, a in enumerate(equivalent_aggregations)}
    ours = speat[speat["aggregation"].isin(rank)].copy()
    ours["_rank"] = ours["aggregation"].map(rank)
    ours = ours.sort_values("_rank", kind="stable").drop_duplicates(["model_id", "test"], keep="first")
    merged = ours.merge(paper, on=["model_id", "test"], how="inner")
    merged["d_minus_paper"] = merged["d"] - merged["paper_d"]
    merged["same_sign"] = (merged["d"] > 0) == (merged["paper_d"] > 0)
    for c in cols:
        if c not in merged.columns:
            merged[c] = pd.NA
    return merged[cols].reset_index(drop=True)
