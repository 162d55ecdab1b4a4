"""The seven flow nodes (FN-14 to FN-20): wait, condition, split, join, goal, throttle and
quiet_hours."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from app.db.dialect import insert
from app.engines.funnels.contacts.segments import evaluate
from app.engines.funnels.definitions.graph import (
    Condition,
    Goal,
    Join,
    QuietHours,
    Split,
    Throttle,
    Wait,
)
from app.engines.funnels.experiments.routing import experiment_choice
from app.engines.funnels.models import RUN_COMPLETED, ThrottleWindow
from app.engines.funnels.runs.due.times import duration_end, field_date_at, next_weekday_at
from app.engines.funnels.runs.work.nodes.base import (
    End,
    Executor,
    Next,
    NodeContext,
    Outcome,
    Sleep,
)
from app.scheduling.zones import zone_or_utc


def wait_end(node: Wait, ctx: NodeContext) -> datetime | None:
    """When this wait ends for this contact (None: the date field is empty)."""
    tz = zone_or_utc(ctx.contact.timezone)
    if node.until is not None:
        return node.until.astimezone(UTC)
    if node.weekday is not None:
        return next_weekday_at(ctx.now, tz, node.weekday, node.hour or 0, node.minute)
    if node.field is not None:
        value = (ctx.contact.fields or {}).get(node.field)
        if not isinstance(value, str):
            return None
        return field_date_at(value, node.offset_days, tz, node.hour or 0, node.minute)
    return duration_end(
        ctx.now,
        tz,
        days=node.days,
        hours=node.hours,
        minutes=node.minutes,
        hour=node.hour,
        minute=node.minute,
    )


async def run_wait(ctx: NodeContext, node: Wait) -> Outcome:
    """FN-14. The wait's end is computed once, when the run arrives, and kept in the context;
    a later wake (an event, an expired lease) re-checks it without recomputing."""
    run = ctx.run
    state = run.context.get("wait")
    if isinstance(state, dict) and state.get("node") == node.id:
        if node.until_event and run.woken_by == node.until_event:
            _clear_wait(ctx)
            return Next(node.event_next or node.next, f"ended early by event '{node.until_event}'")
        until = datetime.fromisoformat(state["until"])
        if ctx.now >= until:
            _clear_wait(ctx)
            return Next(node.next, "wait over")
        run.woken_by = None
        return Sleep(until, record=False)
    end = wait_end(node, ctx)
    if end is None:
        return Next(node.next, f"no date in field '{node.field}': not waiting")
    if end <= ctx.now:
        return Next(node.next, "wait already over")
    end_text = end.isoformat()
    run.context["wait"] = {"node": node.id, "until": end_text}
    run.waiting_event = node.until_event
    run.woken_by = None
    return Sleep(end, f"until {end_text}", {"until": end_text})


def _clear_wait(ctx: NodeContext) -> None:
    ctx.run.context.pop("wait", None)
    ctx.run.waiting_event = None
    ctx.run.woken_by = None


async def run_condition(ctx: NodeContext, node: Condition) -> Outcome:
    """FN-15: a segment predicate on this contact, now, which may also read what the run
    produced (an ``http_request``'s answer, a payment, a booking, a generated variable)."""
    facts = (await ctx.facts()).in_run(ctx.run.context)
    result = evaluate(node.predicate, facts, now=ctx.now, custom=ctx.custom_fields)
    return Next(node.yes if result else node.no, "yes" if result else "no")


def split_choice(run_id: int, node: Split) -> str:
    """A weighted choice that is a pure function of the run and the node, so re-executing the
    node (after a crash) chooses the same branch even before the choice is stored."""
    total = sum(b.weight for b in node.branches)
    digest = hashlib.sha256(f"{run_id}:{node.id}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") % total
    for branch in node.branches:
        if point < branch.weight:
            return branch.name
        point -= branch.weight
    return node.branches[-1].name


async def run_split(ctx: NodeContext, node: Split) -> Outcome:
    """FN-16: the chosen branch is stored in the run's context and reused on later passes."""
    splits: dict[str, Any] = ctx.run.context.setdefault("splits", {})
    name = splits.get(node.id)
    output: dict[str, Any] = {}
    if name not in {b.name for b in node.branches}:
        if node.experiment is not None:
            # An experiment assigns per contact (re-entry keeps the branch) or to its winner.
            name, output["assignment"] = await experiment_choice(
                ctx.session, ctx.run.funnel_id, node, ctx.run.contact_id
            )
        else:
            name = split_choice(ctx.run.id, node)
        splits[node.id] = name
    branch = next(b for b in node.branches if b.name == name)
    return Next(branch.next, f"branch {name}", {"branch": name, **output})


async def run_join(ctx: NodeContext, node: Join) -> Outcome:
    """FN-17: branches meet; the arrival is counted in the context."""
    joins: dict[str, int] = ctx.run.context.setdefault("joins", {})
    joins[node.id] = int(joins.get(node.id, 0)) + 1
    return Next(node.next, "joined")


async def run_goal(ctx: NodeContext, node: Goal) -> Outcome:
    """FN-18: reaching the goal ends the flow."""
    how = ctx.run.context.pop("goal_reached_by", "reached")
    return End(RUN_COMPLETED, f"goal:{node.id}", f"goal {how}")


def window_start(now: datetime, period_seconds: int) -> datetime:
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % period_seconds, UTC)


async def run_throttle(ctx: NodeContext, node: Throttle) -> Outcome:
    """FN-19: at most ``limit`` runs pass per window; the others wait for the next window.

    The counter is one row per (key, window), taken with a conditional UPDATE so concurrent
    workers cannot pass more than the limit."""
    if node.scope == "channel":
        key = f"channel:{ctx.run.workspace_id}:{node.channel}"
    else:
        key = f"funnel:{ctx.run.funnel_id}:{node.id}"
    start = window_start(ctx.now, node.period_seconds)
    await ctx.writing()
    session = ctx.session
    await session.execute(
        insert(session, ThrottleWindow)
        .values(key=key, window_start=start, used=0)
        .on_conflict_do_nothing()
    )
    taken = await session.scalar(
        update(ThrottleWindow)
        .where(
            ThrottleWindow.key == key,
            ThrottleWindow.window_start == start,
            ThrottleWindow.used < node.limit,
        )
        .values(used=ThrottleWindow.used + 1)
        .returning(ThrottleWindow.used)
    )
    if taken is not None:
        return Next(node.next, f"passed {taken}/{node.limit}")
    reopen = start + timedelta(seconds=node.period_seconds)
    return Sleep(reopen, f"held until {reopen.isoformat()} ({node.limit} per window used)")


async def run_quiet_hours(ctx: NodeContext, node: QuietHours) -> Outcome:
    """FN-20: a message-layer setting: every later send of this run is held outside these hours
    (contact's time zone). No branch needs to repeat it."""
    ctx.run.context["quiet"] = [node.start_hour, node.end_hour]
    return Next(node.next, f"quiet {node.start_hour:02d}:00-{node.end_hour:02d}:00 local")


EXECUTORS: dict[str, Executor] = {
    "wait": run_wait,
    "condition": run_condition,
    "split": run_split,
    "join": run_join,
    "goal": run_goal,
    "throttle": run_throttle,
    "quiet_hours": run_quiet_hours,
}
