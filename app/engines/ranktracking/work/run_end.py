"""Ending a child run: its status from its keyword results (RT-33 to RT-35), its reservation
settled for what came back (RT-24), and what follows from the outcome — the activity log, the
schedule's failure and block counters, and the alert evaluation queued for the request.

The one way a run ends, whether its last result came from a poll, a postback or the
reconciliation of a run whose tasks were lost (:mod:`.runs`, :mod:`.poller`, :mod:`.reconcile`).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from sqlalchemy import func, select, update

from app.db.session import UnitOfWork, WriteSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.alerts.evaluate import queue_evaluation
from app.engines.ranktracking.amounts import exact_eur
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import (
    FAILED,
    NO_DATA,
    PARTIAL,
    PENDING,
    RETRIEVED,
    SUCCEEDED,
    Result,
    Run,
    Schedule,
)
from app.engines.ranktracking.pricing import PriceList, billable_micros
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.run_states import RUNS
from app.engines.ranktracking.work import provider_gap


async def finalize(uow: UnitOfWork, deps: RankTrackingDeps, run: Run, now: datetime) -> None:
    """End a run from its results (RT-33 to RT-35) and settle its reservation (RT-24)."""
    await _close(uow.session, run, now)
    await _settle(uow.session, deps, run, now)
    await _count_outcome(uow.session, run, now)
    # Alerts are evaluated by a job once the whole request has ended, never in this transaction.
    await queue_evaluation(uow, deps, run)


async def _close(session: WriteSession, run: Run, now: datetime) -> None:
    """Move the run to ``succeeded``, ``partial`` or ``failed`` by what its keywords got."""
    counts = Counter(
        dict(
            (
                await session.execute(
                    select(Result.state, func.count())
                    .where(Result.run_id == run.id)
                    .group_by(Result.state)
                )
            ).all()
        )
    )
    run.retrieved = int(counts.get(RETRIEVED, 0))
    run.no_data = int(counts.get(NO_DATA, 0))
    answered = run.retrieved + run.no_data
    if run.requested and answered == run.requested:
        RUNS.move(run, SUCCEEDED)
    elif answered > 0:
        RUNS.move(run, PARTIAL)
        run.error_code = run.error_code or ("incomplete" if counts.get(PENDING) else "some_failed")
    else:
        RUNS.move(run, FAILED)
        first_error = await session.scalar(
            select(Result.error_code)
            .where(Result.run_id == run.id, Result.error_code.is_not(None))
            .limit(1)
        )
        run.error_code = run.error_code or first_error or "no_answer"
        run.error_message = run.error_message or "the provider returned nothing usable"
    run.finished_at = now
    run.updated_at = now


async def _settle(session: WriteSession, deps: RankTrackingDeps, run: Run, now: datetime) -> None:
    """Charge what was measured, release the rest, and note a provider cost gap (RT-53)."""
    schedule = await session.get(Schedule, run.schedule_id)
    assert schedule is not None
    prices = PriceList.from_settings(deps.settings.ranktracking)
    charge = billable_micros(
        prices,
        data_type=run.data_type,
        billable=run.retrieved,
        queue=run.queue,
        depth=run.depth,
        device=run.device,
        packages=list(run.packages or []),
    )
    settled = await ledger.settle(
        session,
        run,
        organisation_id=schedule.organisation_id,
        charge_micros=charge,
        now=now,
        provider_cost=run.provider_cost,
        provider_micros=(
            prices.provider_micros(run.provider_cost) if run.provider_cost is not None else None
        ),
    )
    if settled is None:
        return
    provider_gap.record(
        session,
        run,
        settled,
        now,
        unit=await _unit_price(session, run, prices),
        tolerance_percent=deps.settings.ranktracking.cost_tolerance_percent,
    )
    activity.record_run_outcome(
        session,
        run,
        kind=activity.RUN_SETTLED,
        message=f"{activity.run_label(run)} {run.status}: "
        f"{run.retrieved}/{run.requested} measured, "
        f"{exact_eur(settled.charged_micros)} EUR charged",
        now=now,
    )


async def _count_outcome(session: WriteSession, run: Run, now: datetime) -> None:
    """A failed run counts against its schedule; any other ending resets the counters."""
    if run.status == FAILED:
        activity.record_run_outcome(
            session,
            run,
            kind=activity.RUN_FAILED,
            code=run.error_code,
            message=f"{activity.run_label(run)} failed: {run.error_code}",
            now=now,
        )
        await session.execute(
            update(Schedule)
            .where(Schedule.id == run.schedule_id)
            .values(consecutive_failures=Schedule.consecutive_failures + 1)
        )
    else:
        # RT-23: a group ending succeeded or partial resets the consecutive-block counter.
        await session.execute(
            update(Schedule)
            .where(Schedule.id == run.schedule_id)
            .values(consecutive_blocks=0, consecutive_failures=0)
        )


async def _unit_price(
    session: WriteSession, run: Run, prices: PriceList
) -> provider_gap.UnitPrice | None:
    """The provider's cost per task it created for ``run``, beside the price list's (RT-53)."""
    if run.provider_cost is None:
        return None
    units = int(
        await session.scalar(
            select(func.count(func.distinct(Result.task_id))).where(
                Result.run_id == run.id, Result.task_id.is_not(None), Result.task_id != ""
            )
        )
        or 0
    )
    if units <= 0:
        return None
    if run.data_type == "serp":
        listed = prices.serp_unit_usd(
            depth=run.depth or 10, queue=run.queue, device=run.device or "desktop"
        )
    else:
        listed = prices.keyword_data_task_usd(list(run.packages or []))
    return provider_gap.UnitPrice(
        units=units, provider_usd=run.provider_cost / units, list_usd=listed
    )
