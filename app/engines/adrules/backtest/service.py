"""Run a backtest: the rule's objects listed as a run lists them, their daily Insights read in
batched calls, the replay per ad account, the answer assembled. Reads only; writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, time, timedelta
from decimal import Decimal

from app.engines.adrules import accounts as account_service
from app.engines.adrules import rule_views
from app.engines.adrules.backtest import schemas as out
from app.engines.adrules.backtest.daily import DailyRead, read_daily
from app.engines.adrules.backtest.history import other_rules_changes
from app.engines.adrules.backtest.replay import (
    ERROR,
    NOT_EXECUTED,
    SKIPPED,
    WOULD_EXECUTE,
    Replay,
    ReplayInput,
    WouldAction,
    evaluation_instant,
    replay,
)
from app.engines.adrules.backtest.window import (
    LIFETIME_LOOKBACK_DAYS,
    check_range,
    earliest_day,
    lookback_start,
)
from app.engines.adrules.catalogue import LEVEL_EDGES, LEVEL_FIELDS
from app.engines.adrules.claim.fetch import FetchFailed, fetch_campaigns
from app.engines.adrules.claim.prefilters import to_filtering
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.documents import load_prefilters, load_schedule
from app.engines.adrules.models import AdAccount
from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.schemas import (
    ClockCondition,
    CustomMetricCondition,
    MetricMetricCondition,
    MetricValueCondition,
    PreFilters,
    TaskDocument,
)
from app.engines.adrules.validation import check_rule
from app.engines.adrules.work.insights import plan_insights
from app.engines.adrules.work.insights_shapes import InsightsPlan
from app.errors import ValidationFailed
from app.integrations.meta.reader import MetaReader
from app.scheduling.zones import zone_or_utc

MAX_OBJECTS = 2_000
"""Objects replayed per ad account (the first ones Meta lists)."""
MAX_OBJECT_DAYS = 1_000_000
"""Object-days one ad account replays at most (500 objects over Meta's whole 37 months fit)."""
MAX_ACTIONS = 5_000
"""Would-be actions listed in one answer (the totals count them all)."""
APPROXIMATE_METRICS = frozenset({"reach", "frequency", "unique_clicks", "unique_ctr", "cpp"})


@dataclass(frozen=True, slots=True)
class _Rule:
    id: int | None
    name: str
    level: str
    prefilters: PreFilters
    zone: str | None
    tasks: Sequence[TaskDocument]
    account_ids: Sequence[int]


async def backtest_saved(
    deps: AdRulesDeps, *, workspace_id: int, rule_id: int, data: out.BacktestIn
) -> out.BacktestResult:
    """Replay a saved rule of the workspace (another workspace's rule: not found)."""
    async with deps.db.read() as session:
        view = await rule_views.view_rule(session, workspace_id=workspace_id, rule_id=rule_id)
    chosen = list(data.account_ids) or view.account_ids
    foreign = [a for a in chosen if a not in view.account_ids]
    if foreign:
        raise ValidationFailed.field(
            "account_ids", f"ad account {foreign[0]} is not one of this rule's ad accounts"
        )
    rule = _Rule(
        id=view.rule.id,
        name=view.rule.name,
        level=view.rule.level,
        prefilters=load_prefilters(view.rule.prefilters),
        zone=load_schedule(view.rule.schedule).timezone,
        tasks=view.tasks,
        account_ids=chosen,
    )
    return await _run(deps, workspace_id, rule, data)


async def backtest_document(
    deps: AdRulesDeps, *, workspace_id: int, data: out.BacktestDocumentIn
) -> out.BacktestResult:
    """Replay a rule document not saved (validated as a save would, its fields under ``rule``)."""
    try:
        check_rule(data.rule)
    except ValidationFailed as exc:
        details = [{**d, "field": f"rule.{d['field']}"} for d in exc.details or []]
        raise ValidationFailed(f"rule.{exc.message}", details=details) from None
    document = data.rule
    tasks = [
        TaskDocument(
            id=i + 1,
            name=t.name or f"Task {i + 1}",
            conditions=t.conditions,
            group=t.group,
            action=t.action,
            cooldown=t.cooldown,
        )
        for i, t in enumerate(document.tasks)
    ]
    rule = _Rule(
        id=None,
        name=document.name,
        level=document.level,
        prefilters=document.prefilters,
        zone=document.schedule.timezone,
        tasks=tasks,
        account_ids=list(data.account_ids) or list(document.account_ids),
    )
    return await _run(deps, workspace_id, rule, data)


async def _run(
    deps: AdRulesDeps, workspace_id: int, rule: _Rule, data: out.BacktestIn
) -> out.BacktestResult:
    now = deps.clock.now()
    if not rule.account_ids:
        raise ValidationFailed.field(
            "account_ids", "name at least one ad account to replay on", code="required"
        )
    async with deps.db.read() as session:
        accounts = [
            await account_service.get_account(session, workspace_id, a) for a in rule.account_ids
        ]
        # "Today" is the earliest of the accounts' own dates: a day still running in one of their
        # zones has no complete Insights yet.
        today = min(now.astimezone(zone_or_utc(a.timezone_name)).date() for a in accounts)
        check_range(data.since, data.until, today)
        token = await account_service.require_token(session, deps.secrets, workspace_id)
    result = out.BacktestResult(
        rule_id=rule.id,
        rule_name=rule.name,
        level=rule.level,
        since=data.since,
        until=data.until,
        evaluate_at=data.evaluate_at,
        caveats=_caveats(rule, data.evaluate_at),
        accounts=[],
        totals=out.BacktestTotals(),
        actions=[],
        objects=[],
        graph_calls=0,
        evaluated_at=now,
    )
    for account in accounts:
        await _account(deps, workspace_id, rule, data, account, token, today, result)
    result.graph_calls = sum(a.graph_calls for a in result.accounts)
    if len(result.actions) > MAX_ACTIONS:
        result.actions = result.actions[:MAX_ACTIONS]
        result.actions_truncated = True
    return result


async def _account(
    deps: AdRulesDeps,
    workspace_id: int,
    rule: _Rule,
    data: out.BacktestIn,
    account: AdAccount,
    token: str,
    today: date,
    result: out.BacktestResult,
) -> None:
    day_zone = zone_or_utc(account.timezone_name).key
    entry = out.BacktestAccount(
        id=account.id,
        meta_id=account.meta_id,
        name=account.name,
        currency=account.currency,
        timezone=day_zone,
        clock_timezone=rule.zone or day_zone,
    )
    result.accounts.append(entry)
    if not account.active:
        entry.error = "the ad account is inactive: nothing is read from it (activate it first)"
        return
    reader = deps.reader(token)
    objects = await _list_objects(deps, reader, rule, data, account, entry)
    if objects is None:
        return
    plan = plan_insights(rule.tasks)
    data_since = max(lookback_start(set(plan.periods), data.since), earliest_day(today))
    entry.data_since = data_since
    read = await _read_days(deps, reader, rule, plan, data_since, data, account, objects, entry)
    objects = [o for o in objects if o.id not in read.errors]
    replay_input = await _replay_input(
        deps, workspace_id, rule, data, account, entry, objects, read, data_since
    )
    # CPU-bound and pure: off the event loop, so the process keeps answering meanwhile.
    replayed = await asyncio.to_thread(replay, replay_input)
    _collect(result, entry, account.id, replayed)


async def _list_objects(
    deps: AdRulesDeps,
    reader: MetaReader,
    rule: _Rule,
    data: out.BacktestIn,
    account: AdAccount,
    entry: out.BacktestAccount,
) -> list[CampaignEntity] | None:
    """The objects to replay, listed as a run lists them; None (``entry`` says why) when they
    cannot be listed or are more than one backtest replays."""
    try:
        fetched = await fetch_campaigns(
            reader,
            account.meta_id,
            to_filtering(rule.prefilters),
            sleep=deps.sleep,
            delays=deps.preview_retry_delays,
            edge=LEVEL_EDGES[rule.level],
            fields=LEVEL_FIELDS[rule.level],
        )
    except FetchFailed as exc:
        entry.error = f"the objects could not be listed: {exc.error.describe()}"
        entry.graph_calls = exc.attempts
        return None
    objects = fetched.campaigns[:MAX_OBJECTS]
    entry.objects, entry.truncated = len(objects), len(fetched.campaigns) > MAX_OBJECTS
    entry.graph_calls = fetched.attempts
    span = (data.until - data.since).days + 1
    if len(objects) * span > MAX_OBJECT_DAYS:
        entry.error = (
            f"{len(objects)} objects over {span} days is more than one backtest replays "
            f"({MAX_OBJECT_DAYS:,} object-days): narrow the range to at most "
            f"{MAX_OBJECT_DAYS // len(objects)} days or the rule's pre-filters"
        )
        return None
    return objects


async def _read_days(
    deps: AdRulesDeps,
    reader: MetaReader,
    rule: _Rule,
    plan: InsightsPlan,
    data_since: date,
    data: out.BacktestIn,
    account: AdAccount,
    objects: list[CampaignEntity],
    entry: out.BacktestAccount,
) -> DailyRead:
    """The objects' daily Insights from ``data_since`` (the lookback the conditions need) to
    the range's end; an object that could not be read is left out, and ``entry`` says so."""
    fields = sorted({f for fs in plan.fields.values() for f in fs} | {"spend"})
    read = await read_daily(
        reader,
        account.meta_id,
        level=rule.level,
        object_ids=[o.id for o in objects],
        statuses=sorted({o.effective_status for o in objects if o.effective_status}),
        fields=fields,
        since=data_since,
        until=data.until,
        sleep=deps.sleep,
        retry_delays=deps.preview_retry_delays,
        max_wait_seconds=deps.throttle_max_wait_seconds,
    )
    entry.graph_calls += read.calls
    entry.insights_rows = read.rows_read
    entry.unread_objects = len(read.errors)
    if read.errors:
        first = next(iter(read.errors.values()))
        entry.error = (
            f"Insights could not be read for {len(read.errors)} object(s), left out: "
            f"{first.describe()}"
        )
    return read


async def _replay_input(
    deps: AdRulesDeps,
    workspace_id: int,
    rule: _Rule,
    data: out.BacktestIn,
    account: AdAccount,
    entry: out.BacktestAccount,
    objects: list[CampaignEntity],
    read: DailyRead,
    data_since: date,
) -> ReplayInput:
    """What the replay needs besides the objects: the days, the rows, and the budget changes
    other rules made on the account over the range (the guard counts them)."""
    day_zone = entry.timezone
    evaluate_at = time.fromisoformat(data.evaluate_at)
    days = [data.since + timedelta(days=i) for i in range((data.until - data.since).days + 1)]
    async with deps.db.read() as session:
        others = await other_rules_changes(
            session,
            workspace_id=workspace_id,
            ad_account_id=account.id,
            rule_id=rule.id or 0,
            start=evaluation_instant(days[0], time(0, 0), day_zone),
            end=evaluation_instant(days[-1], evaluate_at, day_zone) + timedelta(days=1),
        )
    return ReplayInput(
        rule_id=rule.id or 0,
        rule_name=rule.name,
        level=rule.level,
        tasks=rule.tasks,
        objects=objects,
        rows=read.rows,
        currency=account.currency,
        day_zone=day_zone,
        clock_zone=entry.clock_timezone,
        days=days,
        data_since=data_since,
        evaluate_at=evaluate_at,
        other_changes=others,
        max_per_hour=deps.budget_changes_per_hour,
    )


def _collect(
    result: out.BacktestResult, entry: out.BacktestAccount, account_id: int, replayed: Replay
) -> None:
    totals = result.totals
    totals.evaluations += replayed.evaluations
    totals.matches += replayed.matches
    counted = {WOULD_EXECUTE: 0, SKIPPED: 0, NOT_EXECUTED: 0, ERROR: 0}
    executed_by_object: dict[str, int] = {}
    for action in replayed.actions:
        counted[action.outcome] += 1
        if action.outcome == WOULD_EXECUTE:
            executed_by_object[action.object_id] = executed_by_object.get(action.object_id, 0) + 1
        if len(result.actions) <= MAX_ACTIONS:
            result.actions.append(_action(account_id, action))
    totals.would_execute += counted[WOULD_EXECUTE]
    totals.skipped += counted[SKIPPED]
    totals.not_executed += counted[NOT_EXECUTED]
    totals.errors += counted[ERROR]
    totals.objects_matched += len({a.object_id for a in replayed.actions})
    paused = sum((p.paused_spend for p in replayed.paths), Decimal(0))
    entry.spend_paused = str(paused)
    entry.budget_raised = str(replayed.budget_raised)
    entry.budget_lowered = str(replayed.budget_lowered)
    for path in replayed.paths:
        result.objects.append(
            out.BacktestObject(
                account_id=account_id,
                id=path.id,
                name=path.name,
                start_status=path.start_status,
                start_budget=_text(path.start_budget),
                paused_spend=str(path.paused_spend),
                would_execute=executed_by_object.get(path.id, 0),
                days=[
                    out.BacktestDay(
                        day=d.day,
                        status=d.status,
                        budget=_text(d.budget),
                        spend=str(d.spend),
                        paused_spend=str(d.paused_spend),
                        matched=d.matched,
                    )
                    for d in path.days
                ],
            )
        )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _action(account_id: int, action: WouldAction) -> out.BacktestAction:
    return out.BacktestAction(
        day=action.day,
        at=action.at.astimezone(UTC),
        account_id=account_id,
        object_id=action.object_id,
        object_name=action.object_name,
        task_id=action.task_id,
        task_name=action.task_name,
        action=action.action,
        parameters=action.parameters,
        outcome=action.outcome,
        reason=action.reason,
        before=action.before,
        after=action.after,
        conditions=[
            out.BacktestCondition(
                text=c.text, seen=c.seen, compared=c.compared, passed=c.passed, reason=c.reason
            )
            for c in action.conditions
        ],
    )


def _caveats(rule: _Rule, evaluate_at: str) -> list[str]:
    notes = [
        f"Each day is evaluated once, at {evaluate_at} in the ad account's time zone, on that "
        "day's complete Insights (`today` is the whole day).",
        "Objects, and their status and budget on the first day, are as Meta lists them now (one "
        "paused now that delivered in the range starts it active); cooldowns start afresh on the "
        "first day. Spend counts as paused only on days the rule itself would have had the "
        "object paused.",
        "Other rules' budget changes count as recorded; nothing is written to Meta, nothing is "
        "recorded and no notification is sent.",
    ]
    conditions = [c for t in rule.tasks for c in t.conditions]
    metrics = {
        m
        for c in conditions
        if isinstance(c, MetricValueCondition | MetricMetricCondition)
        for m in (
            (c.metric, c.other_metric) if isinstance(c, MetricMetricCondition) else (c.metric,)
        )
    }
    periods = {
        p
        for c in conditions
        if isinstance(c, MetricValueCondition | MetricMetricCondition)
        for p in (
            (c.period, c.other_period) if isinstance(c, MetricMetricCondition) else (c.period,)
        )
    }
    if metrics & APPROXIMATE_METRICS:
        notes.append(
            "Reach, frequency, unique clicks, unique CTR and CPP over several days are estimates: "
            "daily reach is added up, and a person reached on two days counts twice."
        )
    if "lifetime" in periods:
        notes.append(
            f"`lifetime` adds up the {LIFETIME_LOOKBACK_DAYS} days before the range, not the "
            "object's whole life."
        )
    if any(isinstance(c, CustomMetricCondition) for c in conditions):
        notes.append(
            "Custom metrics have no past values (a sheet holds today's): their conditions do not "
            "pass in a backtest."
        )
    if any(isinstance(c, ClockCondition) for c in conditions):
        notes.append(f"Clock conditions read {evaluate_at}, the time of each day's evaluation.")
    return notes
