"""Result tables in the paper's form.

Table 3: one row per model (then the baselines), columns ``<domain> slifs|slms|slbs`` with the
pooled value over all speakers; "-" marks a metric that does not apply (see
:mod:`speechbias.sllm.baselines`) or has no defined value. The group table gives, per domain and
speaker group, the mean and SD across speakers; the baselines get their own (:func:`group_sections`),
one row per domain where a baseline is the same for every speaker group.
"""

from __future__ import annotations

import math

import pandas as pd

from speechbias.sllm.metrics import ALL_GROUPS, METRICS

NOT_APPLICABLE = "-"


def fmt(value: float, digits: int = 1) -> str:
    return NOT_APPLICABLE if value is None or not math.isfinite(float(value)) else f"{float(value):.{digits}f}"


def fmt_mean_sd(mean: float, sd: float, digits: int = 1) -> str:
    if mean is None or not math.isfinite(float(mean)):
        return NOT_APPLICABLE
    return fmt(mean, digits) + ("" if sd is None or not math.isfinite(float(sd)) else f" ± {float(sd):.{digits}f}")


def to_markdown(df: pd.DataFrame) -> str:
    """Markdown of a table of preformatted strings, printed as given (no re-parsing of "100.0" as 100)."""
    if df.empty:
        return "_(no rows)_"
    return df.to_markdown(index=False, disable_numparse=True)


def table3(summary: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Models as rows (order of appearance), ``<domain> <metric>`` columns, formatted strings."""
    cells = summary[summary["group"] == ALL_GROUPS]
    models = list(dict.fromkeys(cells["model"]))
    domains = list(dict.fromkeys(cells["domain"]))
    rows = []
    for model in models:
        row = {"model": model}
        part = cells[cells["model"] == model].set_index(["domain", "metric"])["value"]
        for domain in domains:
            for metric in METRICS:
                row[f"{domain} {metric}"] = fmt(part.get((domain, metric), float("nan")), digits)
        rows.append(row)
    return pd.DataFrame(rows)


def group_table(summary: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Per model, domain and speaker group: each metric as ``mean ± SD`` across speakers, and n speakers."""
    rows = []
    for (model, domain, group), part in summary.groupby(["model", "domain", "group"], sort=False):
        by_metric = part.set_index("metric")
        row = {"model": model, "domain": domain, "group": group, "speakers": int(by_metric["n_speakers"].iloc[0])}
        for metric in METRICS:
            row[metric] = fmt_mean_sd(by_metric.at[metric, "speaker_mean"], by_metric.at[metric, "speaker_sd"], digits)
        rows.append(row)
    return pd.DataFrame(rows)


BASELINE_CONDITION = "baseline"


def _same_in_every_group(rows: pd.DataFrame) -> bool:
    return all(rows[m].nunique() == 1 for m in METRICS)


def baseline_group_table(summary: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """:func:`group_table` of the baselines, a domain's groups folded into one row ("every group")
    when the baseline has the same values in each (the usual case: a baseline does not listen)."""
    table = group_table(summary, digits)
    rows = []
    for _model_domain, part in table.groupby(["model", "domain"], sort=False):
        if _same_in_every_group(part):
            rows.append(part.iloc[[0]].assign(group="every group", speakers=part["speakers"].max()))
        else:
            rows.append(part)
    return pd.concat(rows, ignore_index=True) if rows else table


def group_sections(summary: pd.DataFrame, digits: int = 1) -> list[tuple[str, str]]:
    """report.md sections of the per-group tables: the model's groups, then the baselines (``condition`` ==
    :data:`BASELINE_CONDITION`) in their own table (a run without a model, ``'~sllm'``, has the baselines' only)."""
    is_baseline = summary["condition"] == BASELINE_CONDITION
    sections = []
    if (~is_baseline).any():
        sections.append(
            ("Per speaker group (mean ± SD across speakers)", to_markdown(group_table(summary[~is_baseline], digits)))
        )
    if is_baseline.any():
        sections.append(
            (
                "Baselines per speaker group",
                to_markdown(baseline_group_table(summary[is_baseline], digits))
                + '\n\nA baseline\'s answers do not depend on the voice: "every group" when its values are '
                "the same in each speaker group of the domain.",
            )
        )
    return sections
