"""Alert evaluation: a job run when a child run of a SERP request ends (queued by the run's
finalisation, in its unit of work), never in a web request.

The job waits for the whole request: while a sibling device is still running it does nothing,
and the sibling's own finalisation queues it again. It then compares each device's run with the
same device's previous measured run, and writes one delivery row per rule that fired — keyed by
(rule, request), so evaluating the same request twice, or after a crash, writes nothing more —
and queues the sending of every delivery of the request still waiting to be sent.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, or_, select

from app.db.dialect import insert_ignoring, row_count
from app.db.session import ReadSession, UnitOfWork
from app.engines.ranktracking.alert_models import (
    ALERT_DELIVERIES,
    DELIVERY_PENDING,
    DELIVERY_SENDING,
    AlertDelivery,
    AlertRule,
)
from app.engines.ranktracking.alerts.decide import Movement, matching
from app.engines.ranktracking.alerts.deliver import DELIVER_JOB, DeliveryRef
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import ACTIVE_RUN_STATUSES, RETRIEVED, Request, Result, Run
from app.engines.ranktracking.reports.measurements import KEYWORD_DATA, measured_runs
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy

LOOKBACK = 12
"""Measured requests searched back for a device's previous measurement."""


class RequestRef(JobPayload, frozen=True):
    request_id: int


async def movements_of(
    session: ReadSession, schedule_id: int, request_id: int
) -> list[Movement] | None:
    """Each keyword's move between the request's run and its device's previous measured run;
    None when the request measured nothing."""
    columns = await measured_runs(
        session, schedule_id, before_request=request_id + 1, limit_requests=LOOKBACK
    )
    if not columns or columns[-1].request_id != request_id:
        return None
    current = columns[-1]
    pairs: list[tuple[str, int, int]] = []
    for device, run_id in current.runs.items():
        if device == KEYWORD_DATA:
            continue
        previous = next((c.runs[device] for c in reversed(columns[:-1]) if device in c.runs), None)
        if previous is not None:
            pairs.append((device, run_id, previous))
    if not pairs:
        return []
    rows = await session.execute(
        select(Result.run_id, Result.keyword, Result.position).where(
            Result.run_id.in_([r for _, now, then in pairs for r in (now, then)]),
            Result.state == RETRIEVED,
        )
    )
    by_run: dict[int, dict[str, int | None]] = {}
    for run_id, keyword, position in rows.all():
        by_run.setdefault(run_id, {})[keyword] = position
    movements: list[Movement] = []
    for device, now, then in pairs:
        before = by_run.get(then, {})
        for keyword, position in by_run.get(now, {}).items():
            if keyword in before:
                movements.append(Movement(keyword, device, before[keyword], position))
    return movements


async def evaluate_impl(deps: RankTrackingDeps, request_id: int) -> int:
    """Evaluate the request's alert rules; returns how many new deliveries were written."""
    async with deps.db.read() as session:
        request = await session.get(Request, request_id)
        if request is None:
            return 0
        active = await session.scalar(
            select(func.count())
            .select_from(Run)
            .where(Run.request_id == request_id, Run.status.in_(ACTIVE_RUN_STATUSES))
        )
        if active:
            return 0  # the last device to end queues the evaluation again
        rules = list(
            (
                await session.execute(
                    select(AlertRule)
                    .where(AlertRule.schedule_id == request.schedule_id, AlertRule.enabled)
                    .order_by(AlertRule.id)
                )
            ).scalars()
        )
        movements = await movements_of(session, request.schedule_id, request_id) if rules else None
    fired = [
        (rule, found)
        for rule in rules
        if movements and (found := matching(rule.kind, rule.threshold, rule.device, movements))
    ]
    now = deps.clock.now()
    written = 0
    async with deps.db.write() as uow:
        for rule, found in fired:
            result = await uow.session.execute(
                insert_ignoring(uow.session, AlertDelivery, ["rule_id", "request_id"]).values(
                    workspace_id=rule.workspace_id,
                    schedule_id=rule.schedule_id,
                    rule_id=rule.id,
                    request_id=request_id,
                    channel=rule.channel,
                    matches=[m.as_dict() for m in found],
                    **ALERT_DELIVERIES.create(DELIVERY_PENDING),
                    attempts=0,
                    created_at=now,
                )
            )
            written += row_count(result)
        await _queue_unsent(uow, deps, request_id, now)
    return written


async def _queue_unsent(
    uow: UnitOfWork, deps: RankTrackingDeps, request_id: int, now: datetime
) -> None:
    waiting = await uow.session.execute(
        select(AlertDelivery.id).where(
            AlertDelivery.request_id == request_id,
            or_(
                AlertDelivery.state == DELIVERY_PENDING,
                (AlertDelivery.state == DELIVERY_SENDING) & (AlertDelivery.lease_until <= now),
            ),
        )
    )
    for delivery_id in waiting.scalars():
        await deps.queue.enqueue(
            uow, DELIVER_JOB, DeliveryRef(delivery_id=delivery_id), job_id=f"rt.alert:{delivery_id}"
        )


async def queue_evaluation(uow: UnitOfWork, deps: RankTrackingDeps, run: Run) -> None:
    """Queue the evaluation of ``run``'s request inside the unit of work that ends the run (only
    when its schedule has an enabled rule). Keyed by the run: each device's end queues it once."""
    if run.data_type != "serp":
        return
    has_rule = await uow.session.scalar(
        select(AlertRule.id)
        .where(AlertRule.schedule_id == run.schedule_id, AlertRule.enabled)
        .limit(1)
    )
    if has_rule is None:
        return
    await deps.queue.enqueue(
        uow, EVALUATE_JOB, RequestRef(request_id=run.request_id), job_id=f"rt.alerts:{run.id}"
    )


async def evaluate_alerts(ctx: JobContext, payload: RequestRef) -> None:
    await evaluate_impl(RankTrackingDeps.of(ctx), payload.request_id)


EVALUATE_JOB = JobSpec(
    name="ranktracking.alerts_evaluate",
    payload_type=RequestRef,
    handler=evaluate_alerts,
    max_tries=5,
    backoff_seconds=10.0,
    owner=OwnedBy("request_id", Request),
)
