"""Funnel reports per version and per node, computed on every read from the rows that record what
happened (steps, runs, outbox effects and delivery events), never from counters incremented in
place: a retried webhook or a re-executed node cannot inflate them (as FN-29 for campaigns).

- per node: ``entered`` (runs that executed it), ``waiting`` (active runs standing on it),
  ``exited`` (runs that ended there without completing: exited, cancelled, failed), and for a
  goal node ``goal_reached``;
- per message node: ``queued`` (still in the outbox), ``sent``, ``skipped``, ``failed``, and the
  distinct messages ``delivered``, ``opened``, ``clicked``, ``bounced``, ``complained``,
  ``unsubscribed``, with rates over ``sent``;
- the funnel's status separates runs that finished from messages still in the outbox: a funnel
  whose runs are all done while mail waits to go out is ``delivering``, not ``completed``.
"""

from __future__ import annotations

from collections import defaultdict

import msgspec
from sqlalchemy import distinct, func, or_, select

from app.db.session import ReadSession
from app.engines.funnels.models import (
    OUTBOX_PENDING,
    RUN_ACTIVE,
    DeliveryEvent,
    FunnelVersion,
    OutboxEffect,
    Run,
    Step,
)

REPORTED_KINDS = ("delivered", "opened", "clicked", "bounced", "complained", "unsubscribed")
ENDED_EARLY = ("exited", "cancelled", "failed")


class MessageCounts(msgspec.Struct, kw_only=True):
    queued: int = 0
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    cancelled: int = 0
    delivered: int = 0
    opened: int = 0
    clicked: int = 0
    bounced: int = 0
    complained: int = 0
    unsubscribed: int = 0
    rates: dict[str, float | None] = msgspec.field(default_factory=dict)
    """Each reported kind over ``sent`` (``None`` before anything was sent)."""


class NodeReport(msgspec.Struct, kw_only=True):
    node_id: str
    kind: str
    entered: int = 0
    waiting: int = 0
    exited: int = 0
    goal_reached: int | None = None
    messages: MessageCounts | None = None


class VersionReport(msgspec.Struct, kw_only=True):
    version: int
    runs: dict[str, int]
    nodes: list[NodeReport]


class FunnelReport(msgspec.Struct, kw_only=True):
    funnel_id: int
    status: str
    """``running`` (runs active), ``delivering`` (no run active, messages still in the outbox),
    ``idle`` (nothing in flight)."""
    runs: dict[str, int]
    runs_active: int
    messages_in_outbox: int
    versions: list[VersionReport]


async def messages_in_outbox(session: ReadSession, funnel_id: int) -> int:
    n = await session.scalar(
        select(func.count())
        .select_from(OutboxEffect)
        .join(Run, Run.id == OutboxEffect.run_id)
        .where(Run.funnel_id == funnel_id, OutboxEffect.status == OUTBOX_PENDING)
    )
    return int(n or 0)


_MESSAGE_STATUSES = {
    "pending": "queued",
    "sent": "sent",
    "skipped": "skipped",
    "failed": "failed",
    "cancelled": "cancelled",
}


async def funnel_report(session: ReadSession, funnel_id: int) -> FunnelReport:
    versions = {
        v.id: v
        for v in await session.scalars(
            select(FunnelVersion).where(FunnelVersion.funnel_id == funnel_id)
        )
    }
    runs_by = await _runs_by_version(session, funnel_id)
    tally = _Tally()
    order = tally.declare_nodes(versions)
    await _count_steps(session, funnel_id, tally)
    await _count_current(session, funnel_id, tally)
    in_outbox = await _count_outbox(session, funnel_id, tally)
    await _count_delivery(session, funnel_id, tally)
    tally.rates()
    totals: dict[str, int] = defaultdict(int)
    for by_status in runs_by.values():
        for status, n in by_status.items():
            totals[status] += n
    active = totals.get(RUN_ACTIVE, 0)
    return FunnelReport(
        funnel_id=funnel_id,
        status="running" if active else ("delivering" if in_outbox else "idle"),
        runs=dict(totals),
        runs_active=active,
        messages_in_outbox=in_outbox,
        versions=[
            VersionReport(
                version=v.number,
                runs=dict(runs_by.get(vid, {})),
                nodes=tally.in_order(vid, order[vid]),
            )
            for vid, v in sorted(versions.items(), key=lambda kv: kv[1].number)
        ],
    )


class _Tally:
    """Each (version, node)'s report, filled by the queries in turn."""

    def __init__(self) -> None:
        self.nodes: dict[tuple[int, str], NodeReport] = {}

    def at(self, version_id: int, node_id: str, kind: str = "") -> NodeReport:
        key = (version_id, node_id)
        if key not in self.nodes:
            self.nodes[key] = NodeReport(node_id=node_id, kind=kind)
        elif kind and not self.nodes[key].kind:
            self.nodes[key].kind = kind
        return self.nodes[key]

    def messages(self, version_id: int, node_id: str) -> MessageCounts:
        report = self.at(version_id, node_id)
        if report.messages is None:
            report.messages = MessageCounts()
        return report.messages

    def declare_nodes(self, versions: dict[int, FunnelVersion]) -> dict[int, list[str]]:
        """Every node of every version, reached or not; returns each version's node order."""
        order: dict[int, list[str]] = {}
        for vid, version in versions.items():
            order[vid] = []
            for raw in (version.definition or {}).get("nodes") or []:
                if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                    self.at(vid, raw["id"], str(raw.get("kind", "")))
                    order[vid].append(raw["id"])
        return order

    def rates(self) -> None:
        for report in self.nodes.values():
            if report.messages is not None:
                m = report.messages
                m.rates = {k: (getattr(m, k) / m.sent if m.sent else None) for k in REPORTED_KINDS}

    def in_order(self, version_id: int, order: list[str]) -> list[NodeReport]:
        """The version's node reports in the definition's order (unknown nodes last)."""
        return sorted(
            (r for (rv, _), r in self.nodes.items() if rv == version_id),
            key=lambda r: order.index(r.node_id) if r.node_id in order else len(order),
        )


async def _runs_by_version(session: ReadSession, funnel_id: int) -> dict[int, dict[str, int]]:
    runs_by: dict[int, dict[str, int]] = defaultdict(dict)
    for version_id, status, n in await session.execute(
        select(Run.version_id, Run.status, func.count())
        .where(Run.funnel_id == funnel_id)
        .group_by(Run.version_id, Run.status)
    ):
        runs_by[version_id][status] = int(n)
    return runs_by


async def _count_steps(session: ReadSession, funnel_id: int, tally: _Tally) -> None:
    """Runs that entered each node (a goal node's step is the run reaching it)."""
    for version_id, node_id, kind, n in await session.execute(
        select(Run.version_id, Step.node_id, Step.kind, func.count(distinct(Step.run_id)))
        .join(Run, Run.id == Step.run_id)
        .where(Run.funnel_id == funnel_id)
        .group_by(Run.version_id, Step.node_id, Step.kind)
    ):
        report = tally.at(version_id, node_id, kind)
        report.entered += int(n)
        if kind == "goal":
            report.goal_reached = (report.goal_reached or 0) + int(n)


async def _count_current(session: ReadSession, funnel_id: int, tally: _Tally) -> None:
    """Runs waiting at each node, and those that ended early there."""
    for version_id, node_id, status, n in await session.execute(
        select(Run.version_id, Run.current_node, Run.status, func.count())
        .where(
            Run.funnel_id == funnel_id,
            Run.status.in_([RUN_ACTIVE, *ENDED_EARLY]),
            # A held-out contact never walked the funnel: counted by the experiment report.
            or_(Run.exit_reason.is_(None), Run.exit_reason != "holdout"),
        )
        .group_by(Run.version_id, Run.current_node, Run.status)
    ):
        report = tally.at(version_id, node_id)
        if status == RUN_ACTIVE:
            report.waiting += int(n)
        else:
            report.exited += int(n)


async def _count_outbox(session: ReadSession, funnel_id: int, tally: _Tally) -> int:
    """Each message node's outbox rows by status; returns how many still wait to go out."""
    in_outbox = 0
    for version_id, node_id, status, n in await session.execute(
        select(Run.version_id, OutboxEffect.node_id, OutboxEffect.status, func.count())
        .join(Run, Run.id == OutboxEffect.run_id)
        .where(Run.funnel_id == funnel_id)
        .group_by(Run.version_id, OutboxEffect.node_id, OutboxEffect.status)
    ):
        counts = tally.messages(version_id, node_id)
        name = _MESSAGE_STATUSES.get(status)
        if name is not None:
            setattr(counts, name, getattr(counts, name) + int(n))
        if status == OUTBOX_PENDING:
            in_outbox += int(n)
    return in_outbox


async def _count_delivery(session: ReadSession, funnel_id: int, tally: _Tally) -> None:
    """Messages delivered, opened, clicked, bounced… (each message counted once per kind)."""
    for version_id, node_id, kind, n in await session.execute(
        select(
            Run.version_id,
            OutboxEffect.node_id,
            DeliveryEvent.kind,
            func.count(distinct(DeliveryEvent.outbox_id)),
        )
        .join(OutboxEffect, OutboxEffect.id == DeliveryEvent.outbox_id)
        .join(Run, Run.id == OutboxEffect.run_id)
        .where(Run.funnel_id == funnel_id, DeliveryEvent.kind.in_(REPORTED_KINDS))
        .group_by(Run.version_id, OutboxEffect.node_id, DeliveryEvent.kind)
    ):
        setattr(tally.messages(version_id, node_id), kind, int(n))
