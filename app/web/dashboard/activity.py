"""Time series for the dashboard's charts (drawn by ``static/charts.js``): counts per hour (or per
day over long spans) of what the engines did, read from the rows they already write.

Buckets are computed here from the rows' timestamps rather than with SQL date functions, which
differ between SQLite and PostgreSQL; each engine read is bounded by its time window and by
``CAP`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from app.db.session import ReadSession
from app.engines.adrules.records import batch_outcomes_since
from app.engines.funnels import reads as funnel_reads
from app.engines.funnels.campaigns.models import Campaign

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
CAP = 200_000
"""Most rows one chart reads (a larger campaign is charted from its first CAP sends)."""
DELIVERY_KINDS = ("delivered", "opened", "clicked", "bounced")


def _floor(at: datetime, step: timedelta) -> datetime:
    seconds = int(at.timestamp())
    return datetime.fromtimestamp(seconds - seconds % int(step.total_seconds()), tz=at.tzinfo)


def axis(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Bucket starts from the one holding ``start`` to the one holding ``end``."""
    out, at = [], _floor(start, step)
    while at <= end:
        out.append(at)
        at += step
    return out


def count_into(
    buckets: Sequence[datetime], step: timedelta, rows: Iterable[tuple[datetime, int]]
) -> list[int]:
    """Sum ``(time, amount)`` rows into the buckets (rows outside them are left out)."""
    if not buckets:
        return []
    first = buckets[0]
    counts = [0] * len(buckets)
    for at, amount in rows:
        index = (at - first) // step
        if 0 <= index < len(counts):
            counts[index] += amount
    return counts


def chart(
    buckets: Sequence[datetime], series: list[tuple[str, list[int], str]], **extra: Any
) -> dict[str, Any]:
    """The ``data-chart`` JSON: unix seconds on x, one list of values per series."""
    return {
        "x": [int(b.timestamp()) for b in buckets],
        "series": [{"label": label, "values": values, "color": c} for label, values, c in series],
        "total": sum(sum(values) for _, values, _ in series),
        **extra,
    }


async def workspace_activity(
    session: ReadSession, workspace_id: int, now: datetime, hours: int = 48
) -> dict[str, dict[str, Any]]:
    """The last ``hours`` of the workspace: ad-rule runs (objects executed, skipped, in error,
    per batch created) and campaign messages sent, per hour."""
    since = now - timedelta(hours=hours)
    buckets = axis(since, now, HOUR)
    batches = await batch_outcomes_since(session, workspace_id, since, limit=CAP)
    sent = await funnel_reads.send_times_since(session, workspace_id, since, limit=CAP)
    return {
        "rules": chart(
            buckets,
            [
                ("executed", count_into(buckets, HOUR, ((b[0], b[1]) for b in batches)), "#157f3b"),
                ("skipped", count_into(buckets, HOUR, ((b[0], b[2]) for b in batches)), "#c98a04"),
                ("errors", count_into(buckets, HOUR, ((b[0], b[3]) for b in batches)), "#b42318"),
            ],
            y_label="objects",
            bars=True,
        ),
        "sends": chart(
            buckets,
            [("sent", count_into(buckets, HOUR, ((at, 1) for at in sent)), "#2453c7")],
            y_label="messages",
            bars=True,
        ),
    }


async def campaign_delivery(
    session: ReadSession, campaign: Campaign, now: datetime
) -> dict[str, Any]:
    """A campaign's messages sent and its delivery reports over its sending time: per hour, per
    day when it spans more than three days."""
    sent = await funnel_reads.campaign_send_times(session, campaign.id, limit=CAP)
    events = await funnel_reads.campaign_events(session, campaign.id, DELIVERY_KINDS, limit=CAP)
    times = sent + [at for at, _ in events]
    if not times:
        return chart([], [], y_label="messages")
    start, end = min(times), max(max(times), min(now, campaign.finished_at or now))
    step = DAY if end - start > 3 * DAY else HOUR
    buckets = axis(start, end, step)
    colours = {
        "delivered": "#157f3b",
        "opened": "#7a3fc2",
        "clicked": "#0e7490",
        "bounced": "#b42318",
    }
    series = [("sent", count_into(buckets, step, ((at, 1) for at in sent)), "#2453c7")]
    for kind in DELIVERY_KINDS:
        values = count_into(buckets, step, ((at, 1) for at, k in events if k == kind))
        if any(values):
            series.append((kind, values, colours[kind]))
    return chart(buckets, series, y_label="messages", bars=False)
