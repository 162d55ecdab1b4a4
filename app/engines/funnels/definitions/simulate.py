"""The simulator (FN-27): walk a real contact through a funnel's draft or published graph on a
simulated clock and report the path and every message with its rendered content and send time.

It runs the engine's own node executors — the same code as the runner, so the path is the path a
real run would take — inside a transaction that is always rolled back: whatever a node writes
(a tag, a field, a throttle slot, a run in another funnel) disappears with it, and effects are
collected from the node context instead of being written to the outbox. Nothing leaves the
building: no outbox row, no outside call, no change to the contact.

Waits advance the simulated clock to their end; a wait that could end early on an event is walked
as if the event never came (the report says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from app.db.session import Database, WriteSession
from app.engines.funnels.contacts.facts import load_facts
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import ContactFacts, evaluate, max_event_window
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.graph import Definition, Graph, Wait, kind_of
from app.engines.funnels.definitions.service import current_version, get_funnel, parse_definition
from app.engines.funnels.models import Contact, Funnel
from app.engines.funnels.outbox import payloads
from app.engines.funnels.outbox.payloads import EffectPayload
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.nodes.base import (
    End,
    Next,
    NodeContext,
    NodeFailed,
    Outcome,
    RunState,
    Sleep,
)
from app.errors import ValidationFailed
from app.scheduling.zones import zone_or_utc

Source = Literal["draft", "published"]


@dataclass(frozen=True, slots=True)
class SimStep:
    at: datetime
    node_id: str
    kind: str
    decision: str


@dataclass(frozen=True, slots=True)
class SimMessage:
    node_id: str
    channel: str
    at: datetime
    """When it would go out (quiet hours applied)."""
    local_time: str
    """The same moment in the contact's time zone, e.g. ``Tue 2026-03-03 09:00 Europe/Berlin``."""
    day: int
    """Days after the contact entered (0 = the day they entered)."""
    content: dict[str, Any]


@dataclass(slots=True)
class Simulation:
    entered: bool
    outcome: str
    """``completed``, ``exited``, ``not admitted``, ``horizon`` or ``failed: …``."""
    started_at: datetime
    finished_at: datetime
    path: list[SimStep] = field(default_factory=list)
    messages: list[SimMessage] = field(default_factory=list)


class _Rollback(Exception):
    def __init__(self, result: Simulation) -> None:
        self.result = result


async def simulate(
    db: Database,
    workspace_id: int,
    *,
    funnel_id: int,
    contact_id: int,
    source: Source,
    start: datetime,
    mail_domain: str = "localhost",
    horizon_days: int = 400,
    max_steps: int = 500,
) -> Simulation:
    """Dry-run ``contact_id`` through the funnel from ``start``; writes nothing."""
    if not 1 <= horizon_days <= 3660:
        raise ValidationFailed.field("horizon_days", "between 1 and 3660")
    try:
        async with db.write() as uow:
            result = await _walk(
                uow.session,
                workspace_id,
                funnel_id=funnel_id,
                contact_id=contact_id,
                source=source,
                start=start,
                mail_domain=mail_domain,
                horizon=start + timedelta(days=horizon_days),
                max_steps=max_steps,
            )
            raise _Rollback(result)
    except _Rollback as done:
        return done.result


async def walk_in(
    session: WriteSession,
    workspace_id: int,
    *,
    funnel_id: int,
    contact_id: int,
    start: datetime,
    mail_domain: str = "localhost",
    horizon_days: int = 400,
    max_steps: int = 500,
) -> Simulation:
    """The draft's simulation inside the caller's transaction, which must roll back what the
    walk wrote (a savepoint; see :mod:`app.engines.funnels.drafting.samples`)."""
    return await _walk(
        session,
        workspace_id,
        funnel_id=funnel_id,
        contact_id=contact_id,
        source="draft",
        start=start,
        mail_domain=mail_domain,
        horizon=start + timedelta(days=horizon_days),
        max_steps=max_steps,
    )


async def _walk(
    session: WriteSession,
    workspace_id: int,
    *,
    funnel_id: int,
    contact_id: int,
    source: Source,
    start: datetime,
    mail_domain: str,
    horizon: datetime,
    max_steps: int,
) -> Simulation:
    funnel = await get_funnel(session, workspace_id, funnel_id)
    if source == "draft":
        definition = parse_definition(funnel.draft)
    else:
        definition = parse_definition((await current_version(session, funnel)).definition)
    graph = Graph(definition)
    contact = await get_contact(session, workspace_id, contact_id)
    custom = await field_types(session, workspace_id)
    sim = Simulation(entered=False, outcome="not admitted", started_at=start, finished_at=start)
    names: set[str] = set()
    for predicate in _predicates(graph):
        names |= max_event_window(predicate)[0]

    async def facts() -> ContactFacts:
        return (await load_facts(session, [contact], event_names=names, since=None))[contact.id]

    if graph.entry is None:
        sim.outcome = "failed: the graph has no single entry node"
        return sim
    entry = definition.entry_predicate
    if entry is not None and not evaluate(entry, await facts(), now=start, custom=custom):
        return sim
    sim.entered = True
    state = _first_state(workspace_id, funnel, contact.id, graph.entry)
    now = start
    for _ in range(max_steps):
        ctx = NodeContext(
            session=session,
            run=state,
            contact=contact,
            graph=graph,
            now=now,
            mail_domain=mail_domain,
            facts_loader=facts,
            custom_fields=custom,
            funnel_quiet=_quiet_hours(definition),
        )
        now, finished = await _step(ctx, sim, custom, start=start, horizon=horizon)
        if finished:
            break
    else:
        sim.outcome = "horizon"
    sim.finished_at = now
    return sim


def _quiet_hours(definition: Definition) -> tuple[int, int] | None:
    settings = definition.settings
    if settings.quiet_start_hour is None or settings.quiet_end_hour is None:
        return None
    return (settings.quiet_start_hour, settings.quiet_end_hour)


def _first_state(workspace_id: int, funnel: Funnel, contact_id: int, entry: str) -> RunState:
    """The run as it would start at the entry node (never written)."""
    return RunState(
        id=0,
        workspace_id=workspace_id,
        funnel_id=funnel.id,
        version_id=funnel.current_version_id or 0,
        contact_id=contact_id,
        current_node=entry,
        context={},
        step_count=0,
        waiting_event=None,
        woken_by=None,
        failures=0,
    )


async def _step(
    ctx: NodeContext,
    sim: Simulation,
    custom: dict[str, str],
    *,
    start: datetime,
    horizon: datetime,
) -> tuple[datetime, bool]:
    """Execute the run's current node as the runner would and record it; returns the simulated
    time after it and whether the walk ends here (``sim.outcome`` then says how)."""
    state, graph, now = ctx.run, ctx.graph, ctx.now
    goal = await _goal_met(ctx, graph, custom)
    if goal is not None:
        state.current_node = goal
    node = graph.node(state.current_node)
    if node is None:
        sim.outcome = f"failed: node '{state.current_node}' does not exist"
        return now, True
    kind = kind_of(node)
    executor = EXECUTORS.get(kind)
    if executor is None:
        sim.path.append(SimStep(now, node.id, kind, "cannot execute on this server"))
        sim.outcome = f"failed: {kind} nodes are not executable"
        return now, True
    try:
        outcome = await executor(ctx, node)
    except (NodeFailed, ValidationFailed) as exc:
        sim.path.append(SimStep(now, node.id, kind, f"would fail: {exc}"))
        sim.outcome = f"failed: {exc}"
        return now, True
    for _key, node_id, effect in ctx.effects:
        sim.messages.append(
            _message(node_id, effect.channel, effect.not_before, effect.payload, ctx.contact, start)
        )
    decision = outcome.decision
    if isinstance(outcome, Sleep) and isinstance(node, Wait) and node.until_event:
        decision += f" (simulated as if '{node.until_event}' never arrives)"
    if not (isinstance(outcome, Sleep) and not outcome.record):
        state.step_count += 1
        sim.path.append(SimStep(now, node.id, kind, decision))
    return _follow(outcome, state, sim, now=now, horizon=horizon)


def _follow(
    outcome: Outcome, state: RunState, sim: Simulation, *, now: datetime, horizon: datetime
) -> tuple[datetime, bool]:
    """Where a node's outcome takes the run: the next node, a later time, or the end."""
    if isinstance(outcome, Next):
        if outcome.node is None:
            sim.outcome = "completed"
            return now, True
        state.current_node = outcome.node
    elif isinstance(outcome, Sleep):
        if outcome.until > horizon:
            sim.outcome = "horizon"
            return now, True
        return max(now, outcome.until), False
    elif isinstance(outcome, End):
        sim.outcome = "completed" if outcome.status == "completed" else outcome.status
        return now, True
    return now, False


def _predicates(graph: Graph) -> list[Any]:
    out = [getattr(n, "predicate", None) for n in graph.nodes.values()]
    if graph.definition.entry_predicate is not None:
        out.append(graph.definition.entry_predicate)
    return [p for p in out if p is not None]


async def _goal_met(ctx: NodeContext, graph: Graph, custom: dict[str, str]) -> str | None:
    current = graph.node(ctx.run.current_node)
    if current is None or kind_of(current) == "goal":
        return None
    for goal in graph.goals:
        if goal.predicate is not None and evaluate(
            goal.predicate, await ctx.facts(), now=ctx.now, custom=custom
        ):
            ctx.run.context.pop("wait", None)
            ctx.run.context["goal_reached_by"] = "met while in the funnel"
            return goal.id
    return None


def _message(
    node_id: str,
    channel: str,
    at: datetime,
    payload: EffectPayload,
    contact: Contact,
    start: datetime,
) -> SimMessage:
    tz = zone_or_utc(contact.timezone)
    local = at.astimezone(tz)
    day = (local.date() - start.astimezone(tz).date()).days
    content = {k: v for k, v in payloads.content(payload).items() if k != "message_id"}
    return SimMessage(
        node_id=node_id,
        channel=channel,
        at=at,
        local_time=f"{local:%a %Y-%m-%d %H:%M} {contact.timezone}",
        day=day,
        content=content,
    )
