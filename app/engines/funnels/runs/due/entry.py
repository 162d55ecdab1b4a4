"""Creating runs: a contact enters a funnel's current version (FN-2, FN-3).

Uniqueness is the database's job: the insert is ``ON CONFLICT DO NOTHING`` against the unique
indexes on runs (one per contact per funnel; one *active* one for funnels open to re-entry), so
two triggers firing at the same instant create one run, whatever the interleaving (hard case 4).
A funnel open to re-entry at most once per N days (``settings.reentry_days``) also refuses a
contact who entered it less than N days ago: their committed runs say so, and the gate of
:mod:`app.engines.funnels.runs.due.entry_gate` holds the rule against a concurrent writer.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from app.db.column_arrays import ColumnArrays, fetch_rows, json_text, utc_or_none
from app.db.dialect import insert
from app.db.session import WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.definitions.graph import graph_for_version
from app.engines.funnels.experiments.assign import held_out
from app.engines.funnels.experiments.holdout import hold_back
from app.engines.funnels.models import Funnel, FunnelVersion, Run
from app.engines.funnels.runs.due import entry_gate
from app.engines.funnels.runs.states import RUN_ACTIVE, RUNS

PIECE = 500
"""Contacts per ``IN`` list of the recent-entries read."""

_CREATED = RUNS.create(RUN_ACTIVE)
"""A run is created active (a held-out one is turned ``exited`` by the holdout)."""


async def enter(
    session: WriteSession,
    *,
    version: FunnelVersion,
    contact_id: int,
    now: datetime,
    context: dict[str, Any] | None = None,
) -> int | None:
    """Start a run of ``version`` for the contact; its id, or ``None`` when the contact may not
    enter (already in the funnel, or entered less than ``reentry_days`` ago). The run is due at
    once: ``wake_at = now`` (FN-4)."""
    started = await _start(session, [(version, contact_id, context or {})], now)
    return started[0] if started else None


async def enter_many(
    session: WriteSession, entries: list[tuple[FunnelVersion, int]], *, now: datetime
) -> int:
    """Start many runs in one statement (the trigger matcher's batch); returns how many started.
    Duplicates, within the batch or against existing runs, are dropped by the same indexes."""
    return len(await _start(session, [(v, cid, {}) for v, cid in entries], now))


async def _start(
    session: WriteSession,
    entries: list[tuple[FunnelVersion, int, dict[str, Any]]],
    now: datetime,
) -> list[int]:
    """The ids of the runs started. Set-wise whatever the batch: one insert for every run, and
    for funnels that limit re-entry to once per N days one read of the contacts' recent entries
    and one gate stamp per funnel (:mod:`app.engines.funnels.runs.due.entry_gate`)."""
    rows: list[dict[str, Any]] = []
    limited: dict[int, int] = {}  # funnel id -> re-entry days, for funnels that limit re-entry
    for version, contact_id, context in entries:
        graph = graph_for_version(version.id, version.definition)
        if graph.entry is None:
            continue
        days = graph.definition.settings.reentry_days
        if version.reentry and days is not None:
            limited[version.funnel_id] = max(days, limited.get(version.funnel_id, 0))
        row = {
            "workspace_id": version.workspace_id,
            "funnel_id": version.funnel_id,
            "version_id": version.id,
            "contact_id": contact_id,
            "reentry": version.reentry,
            **_CREATED,
            "current_node": graph.entry,
            "wake_at": now,
            "context": context,
            "step_count": 0,
            "failures": 0,
            "entered_at": now,
            "updated_at": now,
            "ended_at": None,
            "exit_reason": None,
        }
        holdout = graph.definition.settings.holdout
        if holdout is not None and held_out(version.funnel_id, contact_id, holdout.percent):
            hold_back(row, now)
        rows.append(row)
    if limited:
        rows = await _without_recent_entries(session, rows, limited, now)
    if not rows:
        return []
    # One order for every writer: concurrent batches meet on the unique indexes row by row in
    # the same sequence instead of waiting on each other crosswise.
    rows.sort(key=lambda r: (r["funnel_id"], r["contact_id"]))
    # On PostgreSQL one array per column (a fixed text the driver prepares once, values encoded
    # in C): the SQL layer's per-row parameter handling cost more than the insert itself, 0.4 s
    # of a 10,000-contact batch. Elsewhere the rows as parameters (executemany), not a multi-row
    # .values(), which is compiled anew every time.
    table = Run.__table__
    statement = (
        insert(session, table)
        .on_conflict_do_nothing()
        .returning(table.c.id, table.c.funnel_id, table.c.contact_id)
    )
    created = await fetch_rows(
        session, statement, rows, lambda: ColumnArrays(_RUNS_UNNEST, _run_columns(rows))
    )
    if limited:
        refused = await _refused_by_gate(session, created, limited, now)
        if refused:
            await _take_back(session, refused)
            return [run_id for run_id, _, _ in created if run_id not in refused]
    return [run_id for run_id, _, _ in created]


_ENTERED = (
    ("workspace_id", "bigint"),
    ("funnel_id", "bigint"),
    ("version_id", "bigint"),
    ("contact_id", "bigint"),
    ("reentry", "boolean"),
    ("status", "varchar"),
    ("current_node", "varchar"),
    ("wake_at", "timestamptz"),
    ("context", "jsonb"),
    ("step_count", "integer"),
    ("failures", "integer"),
    ("entered_at", "timestamptz"),
    ("updated_at", "timestamptz"),
    ("ended_at", "timestamptz"),
    ("exit_reason", "varchar"),
)
"""The columns a new run's row sets, with their PostgreSQL types."""

_RUNS_UNNEST = (
    f"INSERT INTO funnel_runs ({', '.join(name for name, _ in _ENTERED)}) "  # noqa: S608
    "SELECT * FROM unnest("
    + ", ".join(f"${n}::{pg_type}[]" for n, (_, pg_type) in enumerate(_ENTERED, start=1))
    + ") ON CONFLICT DO NOTHING RETURNING id, funnel_id, contact_id"
)
"""The new runs in the order given (the order every writer meets the unique indexes in)."""


def _run_columns(rows: list[dict[str, Any]]) -> tuple[list[Any], ...]:
    def column(name: str, pg_type: str) -> list[Any]:
        if pg_type == "jsonb":
            return [json_text(row[name]) for row in rows]
        if pg_type == "timestamptz":
            return [utc_or_none(row[name]) for row in rows]
        return [row[name] for row in rows]

    return tuple(column(name, pg_type) for name, pg_type in _ENTERED)


async def _without_recent_entries(
    session: WriteSession, rows: list[dict[str, Any]], limited: dict[int, int], now: datetime
) -> list[dict[str, Any]]:
    """``rows`` less the contacts who entered their (limited) funnel less than its days ago,
    read from the runs already committed (one query per funnel and piece of contacts)."""
    recent: set[tuple[int, int]] = set()
    for funnel_id, days in limited.items():
        ids = sorted({r["contact_id"] for r in rows if r["funnel_id"] == funnel_id})
        workspace_id = next(r["workspace_id"] for r in rows if r["funnel_id"] == funnel_id)
        for start in range(0, len(ids), PIECE):
            found = await session.scalars(
                scoped_select(Run, workspace_id, Run.contact_id)
                .where(
                    Run.funnel_id == funnel_id,
                    Run.contact_id.in_(ids[start : start + PIECE]),
                    Run.entered_at > now - timedelta(days=days),
                )
                .distinct()
            )
            recent.update((funnel_id, cid) for cid in found)
    return [r for r in rows if (r["funnel_id"], r["contact_id"]) not in recent]


async def _take_back(session: WriteSession, run_ids: set[int]) -> None:
    """Delete runs this transaction has just inserted (the gate refused their contacts)."""
    await session.execute(
        delete(Run).where(Run.id.in_(run_ids)).execution_options(synchronize_session=False)
    )


async def _refused_by_gate(
    session: WriteSession, created: list[Any], limited: dict[int, int], now: datetime
) -> set[int]:
    """The new runs of limited funnels whose contacts the gate refuses (an entry committed by
    a concurrent writer less than the funnel's days ago), funnel by funnel in id order."""
    by_funnel: dict[int, dict[int, int]] = defaultdict(dict)
    for run_id, funnel_id, contact_id in created:
        if funnel_id in limited:
            by_funnel[funnel_id][contact_id] = run_id
    refused: set[int] = set()
    for funnel_id in sorted(by_funnel):
        runs = by_funnel[funnel_id]
        admitted = await entry_gate.stamp(
            session, funnel_id, runs.keys(), now=now, days=limited[funnel_id]
        )
        refused.update(run_id for cid, run_id in runs.items() if cid not in admitted)
    return refused


async def published_versions(
    session: WriteSession, workspace_ids: list[int], *, only_active: bool = True
) -> list[tuple[Funnel, FunnelVersion]]:
    """The current version of every (active) published funnel of these workspaces."""
    stmt = (
        select(Funnel, FunnelVersion)
        .join(FunnelVersion, FunnelVersion.id == Funnel.current_version_id)
        .where(Funnel.workspace_id.in_(workspace_ids))
    )
    if only_active:
        stmt = stmt.where(Funnel.active.is_(True))
    return [(f, v) for f, v in (await session.execute(stmt)).all()]
