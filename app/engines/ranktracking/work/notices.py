"""The pause notice (RT-23): when balance blocks pause a schedule, its owner gets an e-mail.

The notice is queued in the same unit of work that pauses the schedule and recorded in the activity
feed; the job sends it through the mail integration, retrying transient SMTP failures.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select

from app.db.session import ReadSession, UnitOfWork
from app.db.tenancy import scoped_select
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.records import activity
from app.integrations.mail import MailSender, OutgoingEmail, PermanentMailError
from app.platform.models import Membership, User
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy

if TYPE_CHECKING:
    from app.scheduling.queue import JobQueue


class PauseNotice(JobPayload, frozen=True):
    schedule_id: int
    notice_id: int
    """The activity row of the notice: it keys the job and the message id."""


async def recipients(session: ReadSession, schedule: Schedule) -> list[str]:
    """The owner, or every admin of the workspace for a schedule created with an API key."""
    if schedule.owner_user_id is not None:
        email = await session.scalar(select(User.email).where(User.id == schedule.owner_user_id))
        if email:
            return [email]
    rows = await session.execute(
        scoped_select(Membership, schedule.workspace_id, User.email)
        .join(Membership, Membership.user_id == User.id)
        .where(Membership.role == "admin")
        .order_by(User.email)
    )
    return list(rows.scalars())


async def send_pause_notice(ctx: JobContext, payload: PauseNotice) -> None:
    async with ctx.db.read() as session:
        schedule = await session.get(Schedule, payload.schedule_id)
        if schedule is None:
            return
        to = await recipients(session, schedule)
    if not to:
        return
    email = OutgoingEmail(
        to=to,
        subject=f"Position tracking paused: {schedule.name}",
        text=(
            f'The schedule "{schedule.name}" was paused after two consecutive requests were '
            "blocked by its monthly cap or the organisation balance.\n\n"
            "Adding balance or raising the cap does not restart it: resume it once funds allow."
        ),
        message_id=f"rt-pause-{payload.schedule_id}-{payload.notice_id}@sweepline",
    )
    try:
        await MailSender(ctx.settings.mail).send(email)
    except PermanentMailError:
        # The address refuses mail for good; the notice stays visible in the activity feed.
        return


PAUSE_NOTICE_JOB = JobSpec(
    name="ranktracking.pause_notice",
    payload_type=PauseNotice,
    handler=send_pause_notice,
    max_tries=8,
    backoff_seconds=30.0,
    owner=OwnedBy("schedule_id", Schedule),
)


async def queue_pause_notice(
    uow: UnitOfWork, queue: JobQueue, schedule: Schedule, now: datetime
) -> None:
    """Record the notice in the feed and queue its e-mail, both inside ``uow``."""
    notice = activity.record(
        uow.session,
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        kind=activity.PAUSE_NOTICE,
        code="paused_balance",
        message=f'"{schedule.name}" paused after two consecutive balance blocks; owner notified',
        now=now,
    )
    await uow.session.flush()
    await queue.enqueue(
        uow,
        PAUSE_NOTICE_JOB,
        PauseNotice(schedule_id=schedule.id, notice_id=notice.id),
        job_id=f"rt.notice:{schedule.id}:{notice.id}",
    )
