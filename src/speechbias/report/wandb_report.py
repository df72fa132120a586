"""A W&B report (wandb's report API) built from a sweep's summary run, when online with an account.

Needs the optional package ``wandb-workspaces`` (``pip install "wandb[workspaces]"``). Offline, without
credentials or without that package nothing is created and the local report.md stays complete on
its own. Any failure is logged and never fails the job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from speechbias.report.wandb_run import has_wandb_credentials

log = logging.getLogger(__name__)


def build_report(
    project: str,
    entity: str | None,
    group: str,
    title: str,
    description: str,
    image_keys: Sequence[str],
    table_keys: Sequence[str],
    sections: Sequence[tuple[str, str]],
):
    """The report object (not saved): the report's markdown sections, the summary run's figures
    (a media browser) and tables, and a run set holding every run of the sweep's W&B group."""
    import wandb_workspaces.expr as wexpr
    import wandb_workspaces.reports.v2 as wr

    runset = wr.Runset(
        entity=entity or "", project=project, name=f"sweep {group}", filters=wexpr.And(wexpr.Metric("Group") == group)
    )
    blocks = [wr.H1(title), wr.P(description)]
    blocks.append(
        wr.PanelGrid(
            runsets=[runset],
            panels=[
                wr.MediaBrowser(title="figures", media_keys=list(image_keys), num_columns=1),
                *[wr.WeavePanelSummaryTable(table_name=k) for k in table_keys],
            ],
        )
    )
    for heading, body in sections:
        blocks += [wr.H2(heading), wr.MarkdownBlock(text=body)]
    return wr.Report(project=project, entity=entity or "", title=title, description=description, blocks=blocks)


def create_report(
    run,
    group: str,
    title: str,
    description: str,
    image_keys: Sequence[str],
    table_keys: Sequence[str],
    sections: Sequence[tuple[str, str]] = (),
) -> str | None:
    """Save a W&B report for ``run``'s project and return its URL; None when offline, without
    credentials, without ``wandb-workspaces`` or on any error."""
    if run is None:
        return None
    try:
        offline = bool(getattr(run, "offline", True)) or getattr(run.settings, "mode", "") != "online"
    except Exception:
        offline = True
    if offline or not has_wandb_credentials():
        log.info("W&B is offline or has no account: no W&B report (the local report.md is complete)")
        return None
    try:
        report = build_report(run.project, run.entity, group, title, description, image_keys, table_keys, sections)
        report.save()
        log.info("W&B report: %s", report.url)
        return str(report.url)
    except ImportError:
        log.info('install "wandb[workspaces]" to also create a W&B report; the local report.md is complete')
    except Exception as exc:  # never fail the job for W&B
        log.warning("W&B report could not be created (%s: %s)", type(exc).__name__, exc)
    return None
