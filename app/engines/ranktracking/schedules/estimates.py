"""What a schedule's runs cost: the admission estimate of one run and the monthly figure (RT-18,
RT-19), for a schedule being created or one that exists."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from app.db.session import ReadSession
from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import MICROS_PER_EUR, eur_down, eur_up
from app.engines.ranktracking.due import RUNS_PER_MONTH
from app.engines.ranktracking.members import resolve
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.money import eur
from app.engines.ranktracking.pricing import (
    STANDARD,
    PriceList,
    fraction_cents_up,
    quote,
)
from app.engines.ranktracking.schedules.config import (
    checked_keyword_count,
    checked_location,
    config_from_schedule,
    config_of,
)
from app.engines.ranktracking.schedules.rules import Config, check_queue, over_run_limit
from app.engines.ranktracking.schemas import EstimateOut, EstimatePart, RankScheduleIn
from app.platform.service import Principal
from app.settings import RankTrackingSettings


def _display(value: Decimal, places: str) -> str:
    return str(value.quantize(Decimal(places), rounding=ROUND_HALF_UP))


async def estimate(
    session: ReadSession,
    rt: RankTrackingSettings,
    *,
    organisation_id: int,
    config: Config,
    keyword_count: int,
    queue: str = STANDARD,
) -> EstimateOut:
    """RT-18: the admission estimate; RT-19: the monthly figure is the standard quote times the
    average frequency, rounded up to the cent."""
    prices = PriceList.from_settings(rt)
    args = {
        "data_type": config.data_type,
        "count": keyword_count,
        "depth": config.depth,
        "devices": config.devices,
        "packages": config.packages,
    }
    run_quote = quote(prices, queue=queue, **args)  # type: ignore[arg-type]
    standard = quote(prices, queue=STANDARD, **args)  # type: ignore[arg-type]
    per_month = RUNS_PER_MONTH[config.frequency]
    monthly = fraction_cents_up(standard.total_micros, per_month)
    available = (await ledger.balance_of(session, organisation_id)).available_micros
    per_keyword = (
        Decimal(run_quote.total_micros) / MICROS_PER_EUR / keyword_count
        if keyword_count
        else Decimal(0)
    )
    return EstimateOut(
        keyword_count=keyword_count,
        queue=queue,  # type: ignore[arg-type]
        cost_per_run_micros=run_quote.total_micros,
        cost_per_run_eur=eur_up(run_quote.total_micros),
        parts=[EstimatePart(device=d, micros=c) for d, c in run_quote.parts],
        runs_per_month=_display(Decimal(per_month.numerator) / per_month.denominator, "0.01"),
        average_per_keyword_eur=_display(per_keyword, "0.000001"),
        monthly_cents=monthly,
        monthly_eur=eur(monthly),
        available_micros=available,
        available_eur=eur_down(available),
        balance_after_run_micros=available - run_quote.total_micros,
        balance_after_run_eur=eur_down(available - run_quote.total_micros),
    )


async def estimate_new(
    session: ReadSession, rt: RankTrackingSettings, principal: Principal, data: RankScheduleIn
) -> EstimateOut:
    config = config_of(data, rt, require_name=False)
    await checked_location(session, config.location_code)
    count = await checked_keyword_count(session, principal.workspace_id, config, rt)
    return await estimate(
        session, rt, organisation_id=principal.organisation_id, config=config, keyword_count=count
    )


async def estimate_existing(
    session: ReadSession, rt: RankTrackingSettings, schedule: Schedule, queue: str = STANDARD
) -> EstimateOut:
    config = config_from_schedule(schedule)
    members = await resolve(session, schedule, rt.max_run_keywords)
    if members.over:
        raise over_run_limit(members.total, rt.max_run_keywords)
    check_queue(schedule.data_type, queue)
    return await estimate(
        session,
        rt,
        organisation_id=schedule.organisation_id,
        config=config,
        keyword_count=len(members.keywords),
        queue=queue,
    )
