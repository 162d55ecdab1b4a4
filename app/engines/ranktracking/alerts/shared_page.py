"""The page a shared report link opens: the e-mail report's document (summary, charts, movers)
over the last :data:`SHARED_DAYS` days with the table of every keyword's position, headed by the
workspace's name and logo, its images inlined as ``data:`` URIs so the page loads nothing else
and needs no script or stylesheet (the service's Content-Security-Policy allows both).
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

from sqlalchemy import select

from app.db.session import ReadSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.alerts.periods import MONTHLY
from app.engines.ranktracking.alerts.report import compose
from app.engines.ranktracking.alerts.report_html import HtmlReport, logo_image, report_html
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.reports.positions import build_rows
from app.platform import logos
from app.platform.models import Workspace

SHARED_DAYS = 30
MAX_ROWS = 2000
"""Keyword rows shown at most (a page, not an export)."""


def inlined(report: HtmlReport) -> str:
    """The document with each ``cid:`` image replaced by its bytes as a ``data:`` URI."""
    page = report.page
    for image in report.images:
        data = base64.b64encode(image.data).decode()
        page = page.replace(
            f'"cid:{image.content_id}"', f'"data:image/{image.subtype};base64,{data}"'
        )
    return page


async def shared_report(session: ReadSession, schedule: Schedule, now: datetime) -> str:
    """The shared page of ``schedule``: everything read is the schedule's own workspace's."""
    start = now - timedelta(days=SHARED_DAYS)
    content = await compose(session, schedule, start, now + timedelta(seconds=1))
    rows = (
        await build_rows(session, schedule, [content.latest], content.baseline)
        if content.latest is not None
        else []
    )
    workspace = await session.scalar(
        select(Workspace.name).where(Workspace.id == schedule.workspace_id)
    )
    report = report_html(
        schedule,
        MONTHLY,
        start,
        content,
        None,
        await locations.name_of(session, schedule.location_code),
        workspace,
        logo=logo_image(await logos.get_logo(session, schedule.workspace_id)),
        span=f"last {SHARED_DAYS} days, {start:%Y-%m-%d} to {now:%Y-%m-%d}",
        positions=rows[:MAX_ROWS],
    )
    return inlined(report)
