"""Sending one alert: an e-mail through the platform's mailer, or a webhook POST signed with the
rule's secret through the guarded client of user-set URLs (every connection checked against
private and internal addresses).

The delivery row is claimed (``pending`` → ``sending`` with a lease) on the shared claim
primitive, so two jobs for the same alert never both send it; ``sent`` is written after the
server accepted it. A process that dies between the two leaves the row ``sending`` until its
lease runs out, and the job's retry sends it again with the same ``Message-ID`` (e-mail) or the
same ``Idempotency-Key`` and delivery id (webhook), so the receiver can recognise the repeat.
Transient failures are retried by the queue; the last attempt, or a permanent refusal, marks the
delivery ``failed``. Each outcome is a line in the activity feed.
"""

from __future__ import annotations

import msgspec
from sqlalchemy import BigInteger, select, update

from app.engines.ranktracking import locations
from app.engines.ranktracking.alert_models import (
    DELIVERY_PENDING,
    DELIVERY_SENDING,
    DELIVERY_SENT,
    AlertDelivery,
    AlertRule,
)
from app.engines.ranktracking.alerts.attempts import send_and_settle
from app.engines.ranktracking.alerts.decide import Movement, describe, keywords, line
from app.engines.ranktracking.alerts.delivery_states import ALERT_DELIVERIES
from app.engines.ranktracking.alerts.links import schedule_page_url
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Request, Schedule
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.wording import counted
from app.integrations.http_guard import (
    HttpRequest,
    OutboundError,
    TransientError,
)
from app.integrations.http_guard.signature import SIGNATURE_HEADER, sign_webhook
from app.integrations.mail import MailSender, OutgoingEmail, PermanentMailError, TransientMailError
from app.platform.crypto import SecretBoxError
from app.platform.models import Workspace
from app.scheduling.claim import Claim, claim_moves
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy

ALERT_SENT = "alert_sent"
ALERT_FAILED = "alert_failed"
LEASE_SECONDS = 120.0
"""Longer than one SMTP conversation or webhook call with its timeout."""

CLAIM = Claim(
    table=AlertDelivery.__table__,  # type: ignore[arg-type]
    due=(
        f"id = :delivery_id AND ({ALERT_DELIVERIES.where_keyed(DELIVERY_PENDING)}"
        f" OR ({ALERT_DELIVERIES.where_keyed(DELIVERY_SENDING)} AND lease_until <= :now))"
    ),
    order_by="id",
    returning=("id",),
    expires="lease_until",
    sets={**claim_moves(ALERT_DELIVERIES, DELIVERY_SENDING), "attempts": "attempts + 1"},
    params={"delivery_id": BigInteger()},
)


class Unsendable(Exception):
    """The rule cannot be delivered as it stands (no URL or secret, a secret the key cannot open)."""


class DeliveryRef(JobPayload, frozen=True):
    delivery_id: int


def webhook_body(
    delivery: AlertDelivery,
    rule: AlertRule,
    schedule: Schedule,
    request: Request,
    link: str,
    location: str | None = None,
) -> bytes:
    return msgspec.json.encode(
        {
            "event": "ranktracking.alert",
            "delivery_id": delivery.id,
            "rule": {
                "id": rule.id,
                "name": rule.name,
                "kind": rule.kind,
                "threshold": rule.threshold,
            },
            "schedule": {
                "id": schedule.id,
                "name": schedule.name,
                "domain": schedule.domain,
                "location_code": schedule.location_code,
                "location_name": location,
            },
            "request_id": request.id,
            "measured_at": request.created_at.isoformat(),
            "matches": delivery.matches,
            "url": link,
        }
    )


def email_of(
    delivery: AlertDelivery,
    rule: AlertRule,
    schedule: Schedule,
    link: str,
    location: str | None = None,
) -> OutgoingEmail:
    moves = [Movement(**m) for m in delivery.matches]
    what = describe(rule.kind, rule.threshold, len(moves))
    return OutgoingEmail(
        to=list(rule.recipients or []),
        subject=f"{schedule.name}: {keywords(len(moves))} {what}",
        text=(
            f'Alert "{rule.name}" of the schedule "{schedule.name}" ({schedule.domain}'
            + (f", {location}" if location else "")
            + "): "
            f"{keywords(len(moves))} {what} in the latest measurement.\n\n"
            + "\n".join(line(m) for m in moves)
            + f"\n\nPositions and charts: {link}\n"
        ),
        # Stable per alert: a resend after a crash carries the same Message-ID.
        message_id=f"rt-alert-{delivery.rule_id}-{delivery.request_id}@sweepline",
        headers={"X-Sweepline-Alert": str(delivery.id)},
    )


async def _send(deps: RankTrackingDeps, delivery: AlertDelivery, rule: AlertRule) -> str:
    """Send the alert; returns how it went out (for the feed)."""
    async with deps.db.read() as session:
        schedule = await session.get(Schedule, delivery.schedule_id)
        request = await session.get(Request, delivery.request_id)
        location = await locations.name_of(session, schedule.location_code if schedule else None)
        allow_private = bool(
            await session.scalar(
                select(Workspace.allow_private_http).where(Workspace.id == delivery.workspace_id)
            )
        )
    assert schedule is not None
    assert request is not None
    link = schedule_page_url(deps, schedule.id)
    if rule.channel == "email":
        email = email_of(delivery, rule, schedule, link, location)
        await MailSender(deps.settings.mail).send(email)
        return f"by e-mail to {counted(len(email.to), 'recipient')}"
    if rule.url is None or rule.sealed_secret is None:
        raise Unsendable("the webhook has no URL or signing secret")
    try:
        secret = deps.secrets.decrypt(rule.sealed_secret.encode())
    except SecretBoxError as exc:
        raise Unsendable(str(exc)) from exc
    body = webhook_body(delivery, rule, schedule, request, link, location)
    timestamp = int(deps.clock.now().timestamp())
    result = await deps.alert_http.request(
        HttpRequest(
            method="POST",
            url=rule.url,
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign_webhook(secret, body, timestamp),
            },
            body=body.decode(),
        ),
        allow_private=allow_private,
        idempotency_key=f"rt-alert:{delivery.rule_id}:{delivery.request_id}",
    )
    return f"by webhook (HTTP {result.status})"


async def _settle(
    deps: RankTrackingDeps, delivery: AlertDelivery, rule: AlertRule, *, state: str, note: str
) -> None:
    now = deps.clock.now()
    async with deps.db.write() as uow:
        await uow.session.execute(
            ALERT_DELIVERIES.transition(
                update(AlertDelivery).where(AlertDelivery.id == delivery.id),
                state,
                from_=(DELIVERY_SENDING,),
            )
            .values(
                lease_until=None,
                error=note if state != DELIVERY_SENT else None,
                sent_at=now if state == DELIVERY_SENT else None,
            )
            .execution_options(synchronize_session=False)
        )
        if state == DELIVERY_PENDING:
            return
        what = f'alert "{rule.name}" ({describe(rule.kind, rule.threshold)}, '
        what += f"{keywords(len(delivery.matches))}, request {delivery.request_id})"
        activity.record(
            uow.session,
            workspace_id=delivery.workspace_id,
            schedule_id=delivery.schedule_id,
            kind=ALERT_SENT if state == DELIVERY_SENT else ALERT_FAILED,
            code=None if state == DELIVERY_SENT else "alert_failed",
            message=f"{what} sent {note}" if state == DELIVERY_SENT else f"{what} failed: {note}",
            now=now,
        )


async def deliver_impl(
    deps: RankTrackingDeps, delivery_id: int, *, final_attempt: bool
) -> str | None:
    """Send one alert unless it was sent or another attempt holds it; returns its new state."""
    now = deps.clock.now()
    claimed = await CLAIM.take(
        deps.db, now=now, limit=1, lease_seconds=LEASE_SECONDS, delivery_id=delivery_id
    )
    if not claimed:
        return None
    async with deps.db.read() as session:
        delivery = await session.get(AlertDelivery, delivery_id)
        rule = await session.get(AlertRule, delivery.rule_id) if delivery else None
    if delivery is None or rule is None:
        return None
    return await send_and_settle(
        lambda: _send(deps, delivery, rule),
        lambda state, note: _settle(deps, delivery, rule, state=state, note=note),
        transient=(TransientMailError, TransientError),
        permanent=(PermanentMailError, OutboundError, Unsendable),
        final_attempt=final_attempt,
    )


async def deliver_alert(ctx: JobContext, payload: DeliveryRef) -> None:
    await deliver_impl(
        RankTrackingDeps.of(ctx),
        payload.delivery_id,
        final_attempt=DELIVER_JOB.is_last_attempt(ctx.attempt),
    )


DELIVER_JOB = JobSpec(
    name="ranktracking.alert_deliver",
    payload_type=DeliveryRef,
    handler=deliver_alert,
    max_tries=6,
    backoff_seconds=30.0,
    owner=OwnedBy("delivery_id", AlertDelivery),
)
