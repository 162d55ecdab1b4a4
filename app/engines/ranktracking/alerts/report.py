"""The scheduled e-mail report of a schedule (weekly or monthly): the summary of the period's latest
measurement (average position and visibility per device, beside the measurement before the
period), the biggest movers and a link to the page.

Settings are a row per schedule holding the end of the period its next report covers. A sweep
claims the rows that are due on the shared claim primitive and, in the same unit of work, moves
each one to the end of the next period, writes the period's report row (unique per schedule and
period start) and queues its e-mail under a job id made of the period: a period is claimed
exactly once, however many processes sweep. Periods missed while nothing ran are not sent late
one by one; the next sweep sends the latest finished period.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from app.db.dialect import insert_ignoring, row_count
from app.db.session import ReadSession, WriteSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.alert_models import (
    DELIVERY_FAILED,
    DELIVERY_PENDING,
    DELIVERY_SENT,
    REPORT_DELIVERIES,
    ReportDelivery,
    ReportSetting,
)
from app.engines.ranktracking.alerts.attempts import send_and_settle
from app.engines.ranktracking.alerts.links import schedule_page_url
from app.engines.ranktracking.alerts.periods import label, next_end, previous_start
from app.engines.ranktracking.alerts.report_content import ReportContent, figure
from app.engines.ranktracking.alerts.report_html import logo_image, report_html
from app.engines.ranktracking.alerts.rules import checked_recipients
from app.engines.ranktracking.alerts.schemas import ReportSettingsIn, ReportSettingsOut
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.reports.measurements import measured_runs
from app.engines.ranktracking.reports.positions import build_rows
from app.engines.ranktracking.reports.summary import run_summaries
from app.engines.ranktracking.wording import counted
from app.engines.ranktracking.work.notices import recipients as owner_recipients
from app.errors import ValidationFailed
from app.integrations.mail import MailSender, OutgoingEmail, PermanentMailError, TransientMailError
from app.platform import logos
from app.platform.models import Workspace
from app.scheduling.claim import Claim
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy
from app.scheduling.sweeper import Every, Sweep, tick_key

REPORT_SENT = "report_sent"
REPORT_FAILED = "report_failed"
MOVERS = 5
"""Biggest gains and biggest losses listed in a report."""
CLAIM_BATCH = 100
TREND_POINTS = 200
"""Measurements charted at most (a daily schedule's month holds about 31)."""

CLAIM = Claim(
    table=ReportSetting.__table__,  # type: ignore[arg-type]
    due="enabled AND next_due_at <= :now",
    order_by="next_due_at, schedule_id",
    returning=("schedule_id", "workspace_id", "period", "next_due_at"),
    sets={"last_claimed_at": ":now"},
    key="schedule_id",
)


# -- settings -----------------------------------------------------------------------------------


async def get_settings(session: ReadSession, schedule_id: int) -> ReportSetting | None:
    return await session.get(ReportSetting, schedule_id)


def settings_out(schedule_id: int, setting: ReportSetting | None) -> ReportSettingsOut:
    if setting is None:
        return ReportSettingsOut(
            schedule_id=schedule_id, period=None, recipients=[], enabled=False, next_due_at=None
        )
    return ReportSettingsOut(
        schedule_id=schedule_id,
        period=setting.period,
        recipients=list(setting.recipients or []),
        enabled=setting.enabled,
        next_due_at=setting.next_due_at if setting.enabled else None,
    )


async def put_settings(
    session: WriteSession, schedule: Schedule, data: ReportSettingsIn, now: datetime
) -> ReportSetting:
    """Create or replace the schedule's report settings. A new or re-enabled report, or a new
    period, starts with the period under way (its report is sent when it ends)."""
    if schedule.data_type != "serp":
        raise ValidationFailed.field("schedule", "only SERP schedules have position reports")
    if schedule.status == ARCHIVED:
        raise ValidationFailed.field("schedule", "the schedule has ended")
    recipients = checked_recipients(data.recipients)
    setting = await session.get(ReportSetting, schedule.id, with_for_update=True)
    if setting is None:
        setting = ReportSetting(
            schedule_id=schedule.id,
            workspace_id=schedule.workspace_id,
            period=data.period,
            enabled=data.enabled,
            next_due_at=next_end(data.period, now),
            created_at=now,
        )
        session.add(setting)
    elif setting.period != data.period or (data.enabled and not setting.enabled):
        setting.next_due_at = next_end(data.period, now)
    setting.period = data.period
    setting.enabled = data.enabled
    setting.recipients = recipients or None
    setting.updated_at = now
    await session.flush()
    return setting


# -- the sweep ----------------------------------------------------------------------------------


class ReportRef(JobPayload, frozen=True):
    delivery_id: int


async def claim_due(deps: RankTrackingDeps, now: datetime) -> int:
    """Claim every report due by ``now``; returns how many periods were claimed."""
    claimed = 0
    while True:
        async with deps.db.write() as uow:
            rows = await CLAIM.take_in(uow.session, now=now, limit=CLAIM_BATCH)
            for row in rows:
                start = previous_start(row.period, row.next_due_at)
                await uow.session.execute(
                    update(ReportSetting)
                    .where(ReportSetting.schedule_id == row.schedule_id)
                    .values(next_due_at=next_end(row.period, now), updated_at=now)
                    .execution_options(synchronize_session=False)
                )
                written = await uow.session.execute(
                    insert_ignoring(
                        uow.session, ReportDelivery, ["schedule_id", "period_start"]
                    ).values(
                        workspace_id=row.workspace_id,
                        schedule_id=row.schedule_id,
                        period=row.period,
                        period_start=start,
                        period_end=row.next_due_at,
                        **REPORT_DELIVERIES.create(DELIVERY_PENDING),
                        created_at=now,
                    )
                )
                if not row_count(written):
                    continue
                delivery_id = await uow.session.scalar(
                    select(ReportDelivery.id).where(
                        ReportDelivery.schedule_id == row.schedule_id,
                        ReportDelivery.period_start == start,
                    )
                )
                assert delivery_id is not None
                await deps.queue.enqueue(
                    uow,
                    REPORT_JOB,
                    ReportRef(delivery_id=delivery_id),
                    job_id=tick_key("rt.report", row.schedule_id, start),
                )
        claimed += len(rows)
        if len(rows) < CLAIM_BATCH:
            return claimed


async def report_tick(ctx: JobContext, tick: datetime) -> None:
    await claim_due(RankTrackingDeps.of(ctx), min(tick, ctx.clock.now()))


REPORT_SWEEP = Sweep("ranktracking.reports", Every(300), report_tick)
"""Every five minutes: a report goes out within minutes of its period's end."""


# -- the report ---------------------------------------------------------------------------------


async def compose(
    session: ReadSession, schedule: Schedule, start: datetime, end: datetime
) -> ReportContent:
    """The period's figures: its latest measurement against the last one before the period (or
    the period's first, when the schedule started within it)."""
    columns = await measured_runs(session, schedule.id)
    within = [c for c in columns if start <= c.measured_at < end]
    earlier = [c for c in columns if c.measured_at < start]
    if not within:
        return ReportContent(None, None, [], {}, [], [], [], [])
    latest = within[-1]
    baseline = earlier[-1] if earlier else (within[0] if len(within) > 1 else None)
    summaries = await run_summaries(session, [latest])
    before = {s.device: s for s in await run_summaries(session, [baseline])} if baseline else {}
    rows = await build_rows(session, schedule, [latest], baseline)
    moved = [r for r in rows if r.delta]
    charted = ([earlier[-1]] if earlier else []) + within[-TREND_POINTS:]
    return ReportContent(
        latest=latest,
        baseline=baseline,
        summaries=summaries,
        before=before,
        gains=sorted((r for r in moved if (r.delta or 0) > 0), key=lambda r: -(r.delta or 0))[
            :MOVERS
        ],
        losses=sorted((r for r in moved if (r.delta or 0) < 0), key=lambda r: r.delta or 0)[
            :MOVERS
        ],
        entered=[r for r in rows if r.change == "new"],
        dropped=[r for r in rows if r.change == "lost"],
        trend=await run_summaries(session, charted),
    )


def report_text(
    schedule: Schedule,
    period: str,
    start: datetime,
    content: ReportContent,
    link: str,
    location: str | None = None,
) -> str:
    where = f"{schedule.domain}, {location}" if location else schedule.domain
    lines = [
        f'Position report for "{schedule.name}" ({where}), {label(period, start)} (UTC).',
        "",
    ]
    if content.latest is None:
        lines += ["No measurement in this period.", ""]
    else:
        lines.append(f"Summary of the latest measurement ({content.latest.measured_at:%Y-%m-%d}):")
        for s in content.summaries:
            was = content.before.get(s.device)
            lines.append(
                f"  {s.device}: average position {figure(s.average_position)}"
                + (f" (was {figure(was.average_position)})" if was else "")
                + f", visibility {figure(s.visibility, ' %')}"
                + (f" (was {figure(was.visibility, ' %')})" if was else "")
                + f", {s.ranked} of {s.measured} keywords ranked"
            )
        lines.append("")
        for title, rows in (
            ("Biggest gains", content.gains),
            ("Biggest losses", content.losses),
            ("Entered the ranking", content.entered),
            ("Dropped out of the ranking", content.dropped),
        ):
            if rows:
                lines.append(f"{title}:")
                lines += [
                    f"  {r.keyword} ({r.device}): {r.previous if r.previous is not None else '–'}"
                    f" → {r.position if r.position is not None else '–'}"
                    for r in rows
                ]
                lines.append("")
        if not (content.gains or content.losses or content.entered or content.dropped):
            lines += ["No keyword moved.", ""]
    lines.append(f"Positions and charts: {link}")
    return "\n".join(lines) + "\n"


async def _settle(
    deps: RankTrackingDeps, delivery: ReportDelivery, schedule: Schedule, *, state: str, note: str
) -> None:
    if state == DELIVERY_PENDING:
        return  # to be retried: the row is still pending, and the queue runs the job again
    now = deps.clock.now()
    async with deps.db.write() as uow:
        await uow.session.execute(
            REPORT_DELIVERIES.transition(
                update(ReportDelivery).where(ReportDelivery.id == delivery.id),
                state,
                from_=(DELIVERY_PENDING,),
            )
            .values(
                error=None if state == DELIVERY_SENT else note,
                sent_at=now if state == DELIVERY_SENT else None,
            )
            .execution_options(synchronize_session=False)
        )
        what = f"{delivery.period} report ({label(delivery.period, delivery.period_start)})"
        activity.record(
            uow.session,
            workspace_id=delivery.workspace_id,
            schedule_id=delivery.schedule_id,
            kind=REPORT_SENT if state == DELIVERY_SENT else REPORT_FAILED,
            code=None if state == DELIVERY_SENT else "report_failed",
            message=f"{what} of {schedule.name!r} "
            + (note if state == DELIVERY_SENT else f"failed: {note}"),
            now=now,
        )


async def send_report_impl(
    deps: RankTrackingDeps, delivery_id: int, *, final_attempt: bool
) -> str | None:
    """Send one period's report unless it went out already; returns its new state."""
    async with deps.db.read() as session:
        delivery = await session.get(ReportDelivery, delivery_id)
        if delivery is None or delivery.state != DELIVERY_PENDING:
            return None
        schedule = await session.get(Schedule, delivery.schedule_id)
        setting = await session.get(ReportSetting, delivery.schedule_id)
        if schedule is None:
            return None
        to = list(setting.recipients or []) if setting else []
        to = to or await owner_recipients(session, schedule)
        content = await compose(session, schedule, delivery.period_start, delivery.period_end)
        location = await locations.name_of(session, schedule.location_code)
        workspace = await session.scalar(
            select(Workspace.name).where(Workspace.id == schedule.workspace_id)
        )
        logo = logo_image(await logos.get_logo(session, schedule.workspace_id))
    if not to:
        await _settle(deps, delivery, schedule, state=DELIVERY_FAILED, note="no recipient")
        return DELIVERY_FAILED
    link = schedule_page_url(deps, schedule.id)
    html = report_html(
        schedule,
        delivery.period,
        delivery.period_start,
        content,
        link,
        location,
        workspace,
        logo=logo,
    )
    email = OutgoingEmail(
        to=to,
        subject=f"Position report: {schedule.name}, {label(delivery.period, delivery.period_start)}",
        text=report_text(schedule, delivery.period, delivery.period_start, content, link, location),
        html=html.page,
        inline_images=html.images,
        message_id=f"rt-report-{schedule.id}-{delivery.period_start:%Y%m%d}@sweepline",
    )

    async def send() -> str:
        await MailSender(deps.settings.mail).send(email)
        return f"sent to {counted(len(to), 'recipient')}"

    return await send_and_settle(
        send,
        lambda state, note: _settle(deps, delivery, schedule, state=state, note=note),
        transient=(TransientMailError,),
        permanent=(PermanentMailError,),
        final_attempt=final_attempt,
    )


async def send_report(ctx: JobContext, payload: ReportRef) -> None:
    await send_report_impl(
        RankTrackingDeps.of(ctx),
        payload.delivery_id,
        final_attempt=REPORT_JOB.is_last_attempt(ctx.attempt),
    )


REPORT_JOB = JobSpec(
    name="ranktracking.report_send",
    payload_type=ReportRef,
    handler=send_report,
    max_tries=6,
    backoff_seconds=60.0,
    owner=OwnedBy("delivery_id", ReportDelivery),
)
