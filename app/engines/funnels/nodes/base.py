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

from app.db.session import WriteSession
from app.engines.funnels.graph import Graph, Node
from app.engines.funnels.models import Contact
from app.engines.funnels.segments import ContactFacts


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
    """The run ends here with ``status`` and ``reason``."""

    status: str
    reason: str
    decision: str = ""
    output: dict[str, Any] = field(default_factory=dict)


Outcome = Next | Sleep | End


@dataclass(frozen=True, slots=True)
class Effect:
    """An external side effect to write to the outbox with the run's advancement."""

    channel: str
    payload: dict[str, Any]
    not_before: datetime


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

    async def facts(self) -> ContactFacts:
        if self._facts is None:
            self._facts = await self.facts_loader()
        return self._facts

    def invalidate_facts(self) -> None:
        self._facts = None


Executor = Callable[[NodeContext, Any], Awaitable[Outcome]]


class NodeFailed(Exception):
    """A node could not execute (the run's savepoint is rolled back and retried later)."""


def node_of(graph: Graph, node_id: str) -> Node:
    node = graph.node(node_id)
    if node is None:
        raise NodeFailed(f"node '{node_id}' is not in the run's version")
    return node
