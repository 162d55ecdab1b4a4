"""The worker tick (FN-4 to FN-9): lease due runs, execute them, commit, sleep.

1. **Lease** — :mod:`app.engines.funnels.runs.claim.lease` claims up to ``limit`` due runs with
   one statement of the shared claim primitive; a run whose worker died is due again when its
   lease runs out (FN-9).
2. **Execute** — one transaction for the whole batch. The leased rows are locked again and
   checked to still belong to this lease (a worker that lost its lease writes nothing). Each run
   executes node after node until a wait or a terminator; each node writes a step row (FN-6).
3. **Commit** — effects (outbox rows), steps and every run's advancement commit together (FN-7).
   A run that fails makes the batch run again with a savepoint per run, so it rolls back alone
   and is retried later with backoff while the others commit.
4. **Sleep** — the next ``wake_at`` is written and the lease released (FN-8).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import inspect, select, text

from app.db.dialect import one_of
from app.db.session import Database, WriteSession
from app.engines.funnels.contacts.facts import load_facts
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.segments import (
    STANDARD_FIELDS,
    ContactFacts,
    FactsWanted,
    evaluate,
    facts_wanted,
)
from app.engines.funnels.definitions.graph import Graph, SetField, graph_for_version, kind_of
from app.engines.funnels.models import Contact, FunnelVersion
from app.engines.funnels.outbox import payloads
from app.engines.funnels.outbox.due.cancel import cancel_pending_effects
from app.engines.funnels.runs.claim.lease import held_runs, lease_runs
from app.engines.funnels.runs.states import (
    RUN_ACTIVE,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUNS,
)
from app.engines.funnels.runs.work.batch_writes import write_batch
from app.engines.funnels.runs.work.nodes import Executors
from app.engines.funnels.runs.work.nodes.base import (
    SAVEPOINT,
    End,
    Next,
    NodeContext,
    NodeFailed,
    RunState,
    Sleep,
    node_of,
)
from app.event_loop import Turns
from app.settings import FunnelSettings

log = logging.getLogger(__name__)


def _copy_json(value: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(value))
    return copied


MAX_FAILURES = 5
"""A run whose node raised this many times in a row is marked failed."""


class _RunFailed(Exception):
    """A run failed in an optimistic batch: retry the batch with a savepoint per run."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    leased: int = 0
    executed: int = 0
    steps: int = 0
    effects: int = 0
    failed: int = 0
    fenced: int = 0
    """Leased runs this worker no longer owned when it came to execute them."""


@dataclass(slots=True)
class _Done:
    """What one run's wake produced, written in bulk at the end of the batch."""

    state: RunState
    status: str
    wake_at: datetime | None
    ended_at: datetime | None = None
    exit_reason: str | None = None
    last_error: str | None = None

    def __post_init__(self) -> None:
        # A held run is active (claim.lease.held_runs). Its advance goes to the database as one
        # array write for the batch, which cannot guard each row's move: the move is checked
        # here, where the runner decides it.
        if self.status != RUN_ACTIVE:
            RUNS.require(RUN_ACTIVE, self.status)


class Runner:
    """Executes leased runs. One instance per process; safe to use from several tasks."""

    def __init__(
        self, db: Database, settings: FunnelSettings, *, mail_domain: str, executors: Executors
    ) -> None:
        self.db = db
        self.settings = settings
        self.mail_domain = mail_domain
        self.executors = executors
        """Node kind → executor: the plugin's table (:data:`app.engines.funnels.plugin.EXECUTORS`)."""

    async def run_batch(
        self, *, owner: str, now: datetime, limit: int | None = None
    ) -> BatchResult:
        """Lease one batch of due runs and execute it."""
        ids = await lease_runs(
            self.db,
            owner=owner,
            now=now,
            limit=limit or self.settings.runner_batch,
            lease_seconds=self.settings.lease_seconds,
        )
        if not ids:
            return BatchResult()
        return await self.execute(ids, owner=owner, now=now)

    async def execute(self, ids: Sequence[int], *, owner: str, now: datetime) -> BatchResult:
        """Execute runs leased by ``owner``, all in one transaction.

        Optimistic first: without per-run savepoints (each costs two round trips). If any run
        fails, that whole transaction is rolled back and the batch is executed again with a
        savepoint per run, so the failing run rolls back alone and the others commit. Either
        way each run's effects and advancement commit together or not at all."""
        try:
            async with self.db.write() as uow:
                return await self._execute(uow.session, ids, owner, now, isolate=False)
        except _RunFailed:
            async with self.db.write() as uow:
                return await self._execute(uow.session, ids, owner, now, isolate=True)

    async def _execute(
        self,
        session: WriteSession,
        ids: Sequence[int],
        owner: str,
        now: datetime,
        *,
        isolate: bool,
    ) -> BatchResult:
        states = await held_runs(session, ids, owner)
        fenced = len(ids) - len(states)
        if not states:
            return BatchResult(leased=len(ids), fenced=fenced)
        graphs = await self._graphs(session, {s.version_id for s in states})
        contacts = await self._contacts(session, states)
        typed = {vid for vid, graph in graphs.items() if _reads_field_types(graph)}
        custom: dict[int, dict[str, str]] = {}
        for ws in {s.workspace_id for s in states if s.version_id in typed}:
            custom[ws] = await field_types(session, ws)
        facts = await self._preload_facts(session, states, graphs, contacts, now)

        done: list[_Done] = []
        steps: list[dict[str, Any]] = []
        effects: list[dict[str, Any]] = []
        failed = 0
        turns = Turns()
        for state in states:
            await turns.give_way()
            contact = contacts.get(state.contact_id)
            if contact is None or contact.deleted_at is not None:
                done.append(_Done(state, RUN_CANCELLED, None, now, "contact_deleted"))
                continue
            if inspect(contact).expired_attributes:
                await session.refresh(contact)
            graph = graphs[state.version_id]
            # The state before the walk is what a failed run is written back from; only the
            # run-by-run pass needs it (a failure in the optimistic one re-executes the batch).
            original = (
                dataclasses.replace(state, context=_copy_json(state.context)) if isolate else state
            )
            ctx = self._context(session, state, contact, graph, now, custom, facts)
            ctx.isolated = isolate
            try:
                run_steps, result = await self._walk(ctx, graph)
                if ctx.savepoint:
                    await session.execute(text(f"RELEASE SAVEPOINT {SAVEPOINT}"))
            except Exception as exc:
                if not isolate:
                    raise _RunFailed from exc
                if ctx.savepoint:
                    await session.execute(text(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}"))
                    await session.execute(text(f"RELEASE SAVEPOINT {SAVEPOINT}"))
                # Values written in memory by the failed run are not in the database.
                session.expire(contact)
                failed += 1
                log.warning("run %s failed at node %s: %s", state.id, state.current_node, exc)
                done.append(self._failure(original, exc, now))
                continue
            steps.extend(run_steps)
            effects.extend(_effect_rows(state, ctx))
            done.append(result)
        await write_batch(session, steps, effects, _advance_rows(done), now)
        return BatchResult(
            leased=len(ids),
            executed=len(states),
            steps=len(steps),
            effects=len(effects),
            failed=failed,
            fenced=fenced,
        )

    async def _contacts(self, session: WriteSession, states: list[RunState]) -> dict[int, Contact]:
        """The contacts of the held runs, by id."""
        ids = {s.contact_id for s in states}
        return {
            c.id: c
            for c in await session.scalars(select(Contact).where(one_of(session, Contact.id, ids)))
        }

    async def _graphs(self, session: WriteSession, version_ids: set[int]) -> dict[int, Graph]:
        rows = await session.execute(
            select(FunnelVersion.id, FunnelVersion.definition).where(
                FunnelVersion.id.in_(version_ids)
            )
        )
        return {vid: graph_for_version(vid, definition) for vid, definition in rows.all()}

    async def _preload_facts(
        self,
        session: WriteSession,
        states: list[RunState],
        graphs: dict[int, Graph],
        contacts: dict[int, Contact],
        now: datetime,
    ) -> dict[int, ContactFacts]:
        """Facts for every contact whose graph has predicates, in a few queries for the batch,
        holding what the batch's predicates read (a graph that tests no tag loads no tags)."""
        predicates_of = {vid: graph_predicates(g) for vid, g in graphs.items()}
        reads_of = {vid: facts_wanted(predicates) for vid, predicates in predicates_of.items()}
        of_contacts: list[Contact] = []
        versions: set[int] = set()
        for state in states:
            contact = contacts.get(state.contact_id)
            if not predicates_of[state.version_id] or contact is None:
                continue
            of_contacts.append(contact)
            versions.add(state.version_id)
        if not of_contacts:
            return {}
        wanted = FactsWanted()
        for version_id in versions:
            wanted |= reads_of[version_id]
        days = wanted.within_days
        return await load_facts(
            session,
            of_contacts,
            event_names=wanted.event_names,
            since=None if days is None else now - timedelta(days=days),
            tags=wanted.tags,
            lists=wanted.lists,
        )

    def _context(
        self,
        session: WriteSession,
        state: RunState,
        contact: Contact,
        graph: Graph,
        now: datetime,
        custom: dict[int, dict[str, str]],
        facts: dict[int, ContactFacts],
    ) -> NodeContext:
        settings = graph.definition.settings
        quiet = (
            (settings.quiet_start_hour, settings.quiet_end_hour)
            if settings.quiet_start_hour is not None and settings.quiet_end_hour is not None
            else None
        )
        preloaded = facts.get(contact.id)

        async def loader() -> ContactFacts:
            names = facts_wanted(graph_predicates(graph)).event_names
            loaded = await load_facts(session, [contact], event_names=names, since=None)
            return loaded[contact.id]

        ctx = NodeContext(
            session=session,
            run=state,
            contact=contact,
            graph=graph,
            now=now,
            mail_domain=self.mail_domain,
            facts_loader=loader,
            custom_fields=custom.get(state.workspace_id, {}),
            funnel_quiet=quiet,
        )
        ctx._facts = preloaded
        return ctx

    async def _walk(self, ctx: NodeContext, graph: Graph) -> tuple[list[dict[str, Any]], _Done]:
        """Execute nodes until the run sleeps or ends; returns its step rows and outcome."""
        state = ctx.run
        steps: list[dict[str, Any]] = []
        await self._watch_goals(ctx, graph)
        for _ in range(self.settings.max_steps_per_wake):
            node = node_of(graph, state.current_node)
            kind = kind_of(node)
            executor = self.executors.get(kind)
            if executor is None:
                raise NodeFailed(f"no executor for {kind} nodes on this server")
            outcome = await executor(ctx, node)
            if not (isinstance(outcome, Sleep) and not outcome.record):
                state.step_count += 1
                steps.append(
                    {
                        "run_id": state.id,
                        "seq": state.step_count,
                        "node_id": node.id,
                        "kind": kind,
                        "decision": outcome.decision[:200],
                        "output": outcome.output,
                    }
                )
            if isinstance(outcome, Next):
                if outcome.node is None:
                    return steps, _Done(state, RUN_COMPLETED, None, ctx.now, "completed")
                state.current_node = outcome.node
                continue
            if isinstance(outcome, Sleep):
                return steps, _Done(state, RUN_ACTIVE, outcome.until)
            if isinstance(outcome, End):
                return steps, _Done(
                    state, outcome.status, None, ctx.now, outcome.reason, outcome.error
                )
        # Runaway guard: hand the run back, due at once, so other runs get their turn.
        return steps, _Done(state, RUN_ACTIVE, ctx.now)

    async def _watch_goals(self, ctx: NodeContext, graph: Graph) -> None:
        """FN-18 at wake time: a contact who meets a goal's condition jumps to it, and what is
        still pending for this run is cancelled."""
        state = ctx.run
        current = graph.node(state.current_node)
        if current is None or kind_of(current) == "goal":
            return
        for goal in graph.goals:
            if goal.predicate is None:
                continue
            if evaluate(goal.predicate, await ctx.facts(), now=ctx.now, custom=ctx.custom_fields):
                await ctx.writing()
                await cancel_pending_effects(
                    ctx.session, ctx.now, reason=f"goal:{goal.id}", run_id=state.id
                )
                state.context.pop("wait", None)
                state.waiting_event = None
                state.woken_by = None
                state.context["goal_reached_by"] = "met while in the funnel"
                state.current_node = goal.id
                return

    def _failure(self, original: RunState, exc: Exception, now: datetime) -> _Done:
        original.failures += 1
        message = f"{type(exc).__name__}: {exc}"[:2000]
        if original.failures >= MAX_FAILURES:
            return _Done(original, RUN_FAILED, None, now, "failed", message)
        backoff = min(3600, 30 * 2 ** (original.failures - 1))
        return _Done(original, RUN_ACTIVE, now + timedelta(seconds=backoff), last_error=message)


def _reads_field_types(graph: Graph) -> bool:
    """Whether running this graph needs the workspace's custom field types: a predicate compares
    a custom field, or a node sets one (its value is checked against the type)."""
    return facts_wanted(graph_predicates(graph)).field_types or any(
        isinstance(node, SetField) and node.field not in STANDARD_FIELDS
        for node in graph.nodes.values()
    )


def graph_predicates(graph: Graph) -> list[Any]:
    """Every predicate the runner may evaluate for this graph (conditions and goals)."""
    out: list[Any] = []
    for node in graph.nodes.values():
        predicate = getattr(node, "predicate", None)
        if predicate is not None:
            out.append(predicate)
    return out


def _effect_rows(state: RunState, ctx: NodeContext) -> list[dict[str, Any]]:
    """The outbox rows of the effects a run's nodes declared."""
    return [
        {
            "workspace_id": state.workspace_id,
            "run_id": state.id,
            "contact_id": state.contact_id,
            "node_id": node_id,
            "channel": effect.channel,
            "idempotency_key": key,
            "payload": payloads.encode(effect.payload),
            "next_attempt_at": effect.not_before,
        }
        for key, node_id, effect in ctx.effects
    ]


def _advance_rows(done: list[_Done]) -> list[dict[str, Any]]:
    """Each run's advancement (:func:`~app.engines.funnels.runs.work.batch_writes.write_batch`)."""
    return [
        {
            "rid": d.state.id,
            "status": d.status,
            "current_node": d.state.current_node,
            "wake_at": d.wake_at,
            "context": d.state.context,
            "waiting_event": d.state.waiting_event,
            "woken_by": d.state.woken_by,
            "step_count": d.state.step_count,
            "failures": d.state.failures,
            "last_error": d.last_error,
            "ended_at": d.ended_at,
            "exit_reason": d.exit_reason,
        }
        for d in done
    ]
