"""The scheduled e-mail report of a schedule (issue 15, item 6): weekly or monthly, with the
summary, the biggest movers and a link to the page, claimed once per period on the deterministic
clock (however many sweeps run at the boundary) and sent once, at a real SMTP server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.alert_models import ReportDelivery
from app.engines.ranktracking.alerts.periods import label, next_end, previous_start
from app.engines.ranktracking.alerts.report import claim_due, send_report_impl
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Activity
from app.integrations.mail import TransientMailError
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.conftest import auth
from tests.engines.ranktracking.factories import KEYWORDS, PLAN, fund, make_schedule, measure
from tests.factories import Tenant

API = "/api/v1/ranktracking"


def test_periods_are_utc_weeks_and_calendar_months() -> None:
    wednesday = datetime(2026, 3, 4, 15, 30, tzinfo=UTC)
    assert next_end("weekly", wednesday) == datetime(2026, 3, 9, tzinfo=UTC)
    assert next_end("weekly", datetime(2026, 3, 9, tzinfo=UTC)) == datetime(2026, 3, 16, tzinfo=UTC)
    assert previous_start("weekly", datetime(2026, 3, 9, tzinfo=UTC)) == datetime(
        2026, 3, 2, tzinfo=UTC
    )
    assert next_end("monthly", datetime(2026, 12, 31, 23, tzinfo=UTC)) == datetime(
        2027, 1, 1, tzinfo=UTC
    )
    assert previous_start("monthly", datetime(2026, 3, 1, tzinfo=UTC)) == datetime(
        2026, 2, 1, tzinfo=UTC
    )
    assert label("monthly", datetime(2026, 2, 1, tzinfo=UTC)) == "February 2026"


async def _deliveries(runtime: Runtime) -> list[ReportDelivery]:
    async with runtime.db.read() as session:
        rows = await session.execute(select(ReportDelivery).order_by(ReportDelivery.id))
        return list(rows.scalars())


async def _send_all(runtime: Runtime) -> list[str | None]:
    return [
        await send_report_impl(RankTrackingDeps.of(runtime), d.id, final_attempt=False)
        for d in await _deliveries(runtime)
    ]


async def test_a_weekly_report_is_sent_once_per_period(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sim: SerpSimulator,
    sink: SmtpSink,
) -> None:
    # Monday 2 March 2026, 09:00 UTC.
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(
        runtime, tenant, name="Shoes", keywords=KEYWORDS, devices=["desktop", "mobile"]
    )
    path = f"{API}/schedules/{schedule.id}/report"
    assert (await client.get(path, headers=auth(tenant))).json()["enabled"] is False
    bad = await client.put(path, json={"period": "daily"}, headers=auth(tenant))
    assert bad.status_code == 422
    bad = await client.put(
        path, json={"period": "weekly", "recipients": ["nobody"]}, headers=auth(tenant)
    )
    assert (bad.status_code, bad.json()["details"][0]["field"]) == (422, "recipients[0]")
    r = await client.put(
        path, json={"period": "weekly", "recipients": ["boss@example.com"]}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    assert r.json()["next_due_at"].startswith("2026-03-09T00:00:00")

    await measure(runtime, sim, schedule.id, PLAN[0])  # Monday: the week's first measurement
    clock.advance(days=2)
    await measure(runtime, sim, schedule.id, PLAN[1])  # Wednesday: the latest of the week
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 0  # the week is not over

    # Across the boundary: two sweeps at once claim the week once.
    clock.set(datetime(2026, 3, 9, 0, 5, tzinfo=UTC))
    counts = await asyncio.gather(
        claim_due(RankTrackingDeps.of(runtime), clock.now()),
        claim_due(RankTrackingDeps.of(runtime), clock.now()),
    )
    assert sorted(counts) == [0, 1]
    assert await _send_all(runtime) == ["sent"]
    clock.advance(hours=1)
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 0
    assert await _send_all(runtime) == [None]  # sent already: nothing twice
    (message,) = sink.snapshot()
    assert message.to == ["boss@example.com"]
    assert message.subject == "Position report: Shoes, week of 2026-03-02 to 2026-03-08"
    body = message.body.replace("\r\n", "\n")
    assert "Summary of the latest measurement (2026-03-04):" in body
    assert ", United States), week of" in body  # RT-63: the location by name
    assert "desktop: average position 4.67 (was 4.00)" in body
    assert "Biggest gains:\n  red shoes (desktop): 5 → 2" in body
    assert "Dropped out of the ranking:" in body
    assert "green shoes (mobile): 3 → –" in body
    assert f"/ui/ranktracking/schedules/{schedule.id}" in body

    # The next week: one more report, with a week that measured nothing.
    clock.set(datetime(2026, 3, 16, 0, 1, tzinfo=UTC))
    assert await claim_due(RankTrackingDeps.of(runtime), clock.now()) == 1
    assert await _send_all(runtime) == [None, "sent"]
    messages = sink.snapshot()
    assert len(messages) == 2
    assert "No measurement in this period." in messages[1].body
    async with runtime.db.read() as session:
        sent = (
            await session.execute(select(Activity.message).where(Activity.kind == "report_sent"))
        ).scalars()
        assert len(list(sent)) == 2

    # Switching to monthly starts with the month under way.
    r = await client.put(path, json={"period": "monthly"}, headers=auth(tenant))
    assert r.json()["next_due_at"].startswith("2026-04-01T00:00:00")


async def test_a_deferred_report_is_retried_and_a_refused_one_fails(
    client: httpx.AsyncClient,
    runtime: Runtime,
    clock: ManualClock,
    tenant: Tenant,
    sink: SmtpSink,
) -> None:
    # Monday 2 March 2026, 09:00 UTC.
    schedule = await make_schedule(runtime, tenant, name="Shoes", keywords=KEYWORDS)
    r = await client.put(
        f"{API}/schedules/{schedule.id}/report",
        json={"period": "weekly", "recipients": ["boss@example.com"]},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    deps = RankTrackingDeps.of(runtime)
    clock.set(datetime(2026, 3, 9, 0, 5, tzinfo=UTC))
    assert await claim_due(deps, clock.now()) == 1
    (week,) = await _deliveries(runtime)

    # A 4xx deferral is the queue's to retry: raised, the row still pending, nothing in the feed.
    sink.inject_failure(451)
    with pytest.raises(TransientMailError):
        await send_report_impl(deps, week.id, final_attempt=False)
    assert [d.state for d in await _deliveries(runtime)] == ["pending"]
    # On the job's last attempt the same deferral fails the report.
    sink.inject_failure(451)
    assert await send_report_impl(deps, week.id, final_attempt=True) == "failed"

    # A 5xx refusal fails the next week's report at once, with attempts left.
    clock.set(datetime(2026, 3, 16, 0, 5, tzinfo=UTC))
    assert await claim_due(deps, clock.now()) == 1
    sink.inject_failure(550)
    assert await send_report_impl(
        deps, (await _deliveries(runtime))[1].id, final_attempt=False
    ) == ("failed")
    assert [(d.state, d.error) for d in await _deliveries(runtime)] == [
        ("failed", "SMTP 451: Requested action aborted: try again later"),
        ("failed", "SMTP 550: Rejected"),
    ]
    assert sink.snapshot() == []
    async with runtime.db.read() as session:
        feed = list(
            (
                await session.execute(select(Activity.kind, Activity.message).order_by(Activity.id))
            ).all()
        )
    failed = [m for kind, m in feed if kind == "report_failed"]
    assert [m.split("failed: ")[1][:8] for m in failed] == ["SMTP 451", "SMTP 550"]
