"""What a node executor sees and what it answers.

An executor is ``async (ctx, node) -> Outcome``. It may write to the database through
``ctx.session`` (inside the run's savepoint) and may queue external effects with
:meth:`NodeContext.emit`; it never talks to the outside world itself (FN-7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text

from app.db.session import WriteSession
from app.engines.funnels.contacts.segments import ContactFacts
from app.engines.funnels.definitions.graph import Graph, Node
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.payloads import EffectPayload


@dataclass(slots=True)
class RunState:
    """The mutable copy of a run the runner works on; written back in one statement."""

    id: int
    workspace_id: int
    funnel_id: int
    version_id: int
    contact_id: int
    current_node: str
    context: dict[str, Any]
    step_count: int
    waiting_event: str | None
    woken_by: str | None
    failures: int


@dataclass(frozen=True, slots=True)
class Next:
    """Continue at ``node`` (``None``: the run is complete)."""

    node: str | None
    decision: str = ""
    output: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sleep:
    """Stay on this node and wake at ``until`` (the node runs again then)."""

    until: datetime
    decision: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    record: bool = True
    """False for a wake that changed nothing (no step row is written)."""


@dataclass(frozen=True, slots=True)
class End:
    """The run ends here with ``status`` and ``reason``; ``error`` is what went wrong, kept as
    the run's ``last_error`` when it ends failed."""

    status: str
    reason: str
    decision: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


Outcome = Next | Sleep | End


@dataclass(frozen=True, slots=True)
class Effect:
    """An external side effect to write to the outbox with the run's advancement."""

    payload: EffectPayload
    """What the effect's channel is given (:mod:`app.engines.funnels.outbox.payloads`)."""
    not_before: datetime

    @property
    def channel(self) -> str:
        return self.payload.channel


@dataclass(slots=True)
class NodeContext:
    session: WriteSession
    run: RunState
    contact: Contact
    graph: Graph
    now: datetime
    mail_domain: str
    facts_loader: Callable[[], Awaitable[ContactFacts]]
    custom_fields: dict[str, str]
    funnel_quiet: tuple[int, int] | None
    effects: list[tuple[str, str, Effect]] = field(default_factory=list)
    """``(idempotency key, node id, effect)`` emitted by this wake."""
    _facts: ContactFacts | None = None
    isolated: bool = True
    """Whether this run's writes must be isolated in a savepoint (see Runner.execute)."""
    savepoint: bool = False
    """Whether the run's savepoint was begun (by :meth:`writing`, before the first write)."""

    @property
    def seq(self) -> int:
        """The sequence number of the step being executed; stable across re-executions because
        ``step_count`` only advances when the run's advancement commits."""
        return self.run.step_count + 1

    def effect_key(self) -> str:
        return f"run-{self.run.id}-step-{self.seq}"

    def emit(self, effect: Effect) -> str:
        key = self.effect_key()
        # The run's current node is the one executing: it only moves after the node returns.
        self.effects.append((key, self.run.current_node, effect))
        return key

    async def writing(self) -> None:
        """Call before writing to the database: the run's writes go into its own savepoint, so
        a failing run rolls back alone. Runs that only move (waits, branches, sends) need none."""
        if self.isolated and not self.savepoint:
            # Plain SQL savepoints: the ORM's begin_nested() snapshots every object of the
            # session, which made a batch quadratic in its size.
            await self.session.execute(text(f"SAVEPOINT {SAVEPOINT}"))
            self.savepoint = True

    async def facts(self) -> ContactFacts:
        if self._facts is None:
            self._facts = await self.facts_loader()
        return self._facts

    def invalidate_facts(self) -> None:
        self._facts = None


SAVEPOINT = "funnel_run"

Executor = Callable[[NodeContext, Any], Awaitable[Outcome]]


class NodeFailed(Exception):
    """A node could not execute (the run's savepoint is rolled back and retried later)."""


def node_of(graph: Graph, node_id: str) -> Node:
    node = graph.node(node_id)
    if node is None:
        raise NodeFailed(f"node '{node_id}' is not in the run's version")
    return node
