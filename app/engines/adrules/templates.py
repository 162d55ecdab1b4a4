"""Shipped rule templates (spec AR-3): Night Budget Reset, Pause losers, Scale winners, Stop-loss.

A template is a function from a few numbers (each with a sensible default) to a complete rule
document. Creating a rule from a template always leaves it in ``draft``: a person points it at an
account, previews it, and sets it live when the numbers look right. A draft is never dispatched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal

import msgspec

from app.db.session import WriteSession
from app.engines.adrules import rules as rule_service
from app.engines.adrules.catalogue import WEEKDAYS, Weekday
from app.engines.adrules.models import Rule
from app.engines.adrules.rule_states import RULE_DRAFT
from app.engines.adrules.schemas import (
    ClockCondition,
    IncreaseBudget,
    IntervalSchedule,
    MetricValueCondition,
    PauseCampaign,
    RuleIn,
    SetBudget,
    TaskIn,
    TimetableSchedule,
    WeeklyGrid,
)
from app.errors import NotFound
from app.integrations.http_guard import AddressGuard
from app.platform.crypto import SecretBox
from app.schemas import RowRef, Schema

TemplateKey = Literal["night_budget_reset", "pause_losers", "scale_winners", "stop_loss"]
Hour = Annotated[int, msgspec.Meta(ge=0, le=23)]


class TemplateParams(Schema, kw_only=True):
    """The numbers a template asks for; every one has a default (money in major units)."""

    amount: Decimal | None = None
    """Night Budget Reset: the daily budget to set."""
    hour: Hour | None = None
    """Night Budget Reset: the local hour it runs at."""
    weekdays: Annotated[list[Weekday], msgspec.Meta(max_length=7)] | None = None
    """Night Budget Reset: the days it runs on."""
    roas: Decimal | None = None
    """Pause losers: pause below this ROAS. Scale winners: scale above it."""
    spend: Decimal | None = None
    """Minimum spend before a verdict (too little data decides nothing)."""
    percent: Decimal | None = None
    """Scale winners: raise the budget by this many percent."""
    max_budget: Decimal | None = None
    """Scale winners: never above this daily budget."""
    cost: Decimal | None = None
    """Stop-loss: the highest acceptable cost per purchase today."""


class FromTemplateIn(Schema, kw_only=True):
    """Create a draft rule from a template."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    account_ids: Annotated[list[RowRef], msgspec.Meta(max_length=500)] = []
    params: TemplateParams = msgspec.field(default_factory=TemplateParams)


@dataclass(frozen=True, slots=True)
class Template:
    key: TemplateKey
    title: str
    description: str
    defaults: TemplateParams
    build: Callable[[TemplateParams], tuple[IntervalSchedule | TimetableSchedule, list[TaskIn]]]

    def rule(self, data: FromTemplateIn) -> RuleIn:
        """The draft rule document for ``data`` (missing numbers take the defaults)."""
        given = msgspec.structs.asdict(data.params)
        merged = {k: (v if v is not None else getattr(self.defaults, k)) for k, v in given.items()}
        schedule, tasks = self.build(TemplateParams(**merged))
        return RuleIn(
            name=data.name or self.title,
            status=RULE_DRAFT,
            account_ids=list(data.account_ids),
            schedule=schedule,
            tasks=tasks,
        )


def _d(value: Decimal | None) -> Decimal:
    assert value is not None  # every template field has a default
    return value


def _night_budget_reset(
    p: TemplateParams,
) -> tuple[IntervalSchedule | TimetableSchedule, list[TaskIn]]:
    hour = p.hour if p.hour is not None else 23
    days = list(p.weekdays or WEEKDAYS)
    slot = f"{hour:02d}:00"
    grid = WeeklyGrid(**{day: [slot] for day in days})
    task = TaskIn(
        name="Reset the daily budget",
        # The clock condition holds the action to that hour even if the schedule changes later.
        conditions=[ClockCondition(hours=[hour], weekdays=days)],
        action=SetBudget(amount=_d(p.amount)),
        cooldown="12h",
    )
    return TimetableSchedule(week=grid), [task]


def _pause_losers(p: TemplateParams) -> tuple[IntervalSchedule | TimetableSchedule, list[TaskIn]]:
    task = TaskIn(
        name="Pause below target ROAS",
        conditions=[
            MetricValueCondition(
                metric="purchase_roas", period="last_7d", operator="lt", value=_d(p.roas)
            ),
            MetricValueCondition(
                metric="spend", period="last_7d", operator="gt", value=_d(p.spend)
            ),
        ],
        group="and",
        action=PauseCampaign(),
        cooldown="24h",
    )
    return IntervalSchedule(minutes=60), [task]


def _scale_winners(p: TemplateParams) -> tuple[IntervalSchedule | TimetableSchedule, list[TaskIn]]:
    task = TaskIn(
        name="Raise the budget of winners",
        conditions=[
            MetricValueCondition(
                metric="purchase_roas", period="last_7d", operator="gt", value=_d(p.roas)
            ),
            MetricValueCondition(
                metric="spend", period="last_7d", operator="gt", value=_d(p.spend)
            ),
        ],
        group="and",
        action=IncreaseBudget(by="percent", amount=_d(p.percent), max=_d(p.max_budget)),
        cooldown="24h",
    )
    return IntervalSchedule(minutes=60), [task]


def _stop_loss(p: TemplateParams) -> tuple[IntervalSchedule | TimetableSchedule, list[TaskIn]]:
    cost = _d(p.cost)
    expensive = TaskIn(
        name="Cost per purchase too high today",
        conditions=[
            MetricValueCondition(
                metric="cost_per_purchase", period="today", operator="gt", value=cost
            )
        ],
        action=PauseCampaign(),
        cooldown="24h",
    )
    # With no purchase at all, cost per purchase has no value; spend alone then tells the loss.
    no_sales = TaskIn(
        name="Spent the limit without a purchase",
        conditions=[
            MetricValueCondition(metric="spend", period="today", operator="gt", value=cost),
            MetricValueCondition(
                metric="purchases", period="today", operator="eq", value=Decimal(0)
            ),
        ],
        group="and",
        action=PauseCampaign(),
        cooldown="24h",
    )
    return IntervalSchedule(minutes=15), [expensive, no_sales]


TEMPLATES: dict[str, Template] = {
    t.key: t
    for t in (
        Template(
            "night_budget_reset",
            "Night Budget Reset",
            "Set every campaign's daily budget to an amount at an hour of the night, on the "
            "weekdays you choose.",
            TemplateParams(amount=Decimal(20), hour=23, weekdays=list(WEEKDAYS)),
            _night_budget_reset,
        ),
        Template(
            "pause_losers",
            "Pause losers",
            "Pause campaigns whose purchase ROAS over the last 7 days is below a target once they "
            "have spent enough to judge.",
            TemplateParams(roas=Decimal("1.0"), spend=Decimal(50)),
            _pause_losers,
        ),
        Template(
            "scale_winners",
            "Scale winners",
            "Raise the daily budget of campaigns beating a ROAS target by a percentage, at most "
            "once a day and never above a ceiling.",
            TemplateParams(
                roas=Decimal("3.0"), spend=Decimal(50), percent=Decimal(20), max_budget=Decimal(500)
            ),
            _scale_winners,
        ),
        Template(
            "stop_loss",
            "Stop-loss",
            "Pause a campaign as soon as today's cost per purchase goes above a limit, or it spends "
            "the limit without a purchase.",
            TemplateParams(cost=Decimal(40)),
            _stop_loss,
        ),
    )
}


def get_template(key: str) -> Template:
    template = TEMPLATES.get(key)
    if template is None:
        raise NotFound(f"no template is called {key!r}", code="template_not_found")
    return template


async def create_from_template(
    session: WriteSession,
    box: SecretBox,
    guard: AddressGuard,
    *,
    workspace_id: int,
    key: str,
    data: FromTemplateIn,
    now: datetime,
) -> Rule:
    """A new rule from ``key``, always a draft (validated like any rule)."""
    return await rule_service.create_rule(
        session, box, guard, workspace_id=workspace_id, data=get_template(key).rule(data), now=now
    )
