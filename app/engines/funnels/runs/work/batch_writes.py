"""A runner batch's writes: its step rows, outbox rows and run advances, one statement each, in
the batch's transaction (FN-6 to FN-8).

On PostgreSQL all three go to the driver as one array per column (``unnest``), in the session's
own transaction: a profile of a 20,000-run drain put the SQL layer's per-row parameter handling
of the executemanys (four step rows, an outbox row of eleven values and fourteen advance values
per run, each through its column type's bind processing) at about a quarter of the runner's CPU;
the arrays are encoded by the driver in C. The statements are fixed texts, prepared once per
connection by the driver's statement cache (:mod:`app.db.column_arrays` picks the spelling).
Elsewhere (SQLite) they are the SQL layer's executemanys.

What is the same for the whole batch is a single value, not a column: a batch's steps happen at
its time, its effects are created pending at its time with no attempt made. Each array element
costs the driver a type check and an encoding (a time the most), and these four were a fifth of
the elements of a batch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, update

from app.db.column_arrays import ColumnArrays, execute_rows, json_text, utc_or_none
from app.db.dialect import insert
from app.db.driver_insert import utc
from app.db.session import WriteSession
from app.engines.funnels.models import OutboxEffect, Run, Step
from app.engines.funnels.outbox.states import OUTBOX, OUTBOX_PENDING

_PENDING = OUTBOX.create(OUTBOX_PENDING)
"""An effect row is created pending (the outbox's machine)."""

STEP_TABLE = cast(Table, Step.__table__)
RUN_TABLE = cast(Table, Run.__table__)

ADVANCED = (
    "status",
    "current_node",
    "wake_at",
    "context",
    "waiting_event",
    "woken_by",
    "step_count",
    "failures",
    "last_error",
    "ended_at",
    "exit_reason",
)
"""What an advance row (besides ``rid``, the run's id) sets; the lease is released with it."""

ADVANCE = (
    update(RUN_TABLE)
    .where(RUN_TABLE.c.id == bindparam("rid"))
    .values(
        {name: bindparam(name) for name in (*ADVANCED, "updated_at", "lease_owner", "lease_until")}
    )
)
"""The run's advancement: one executemany for the whole batch (SQLite)."""

_STEPS_UNNEST = (
    "INSERT INTO funnel_steps (run_id, seq, node_id, kind, decision, output, at) "
    "SELECT *, $7::timestamptz FROM unnest($1::bigint[], $2::integer[], $3::varchar[], "
    "$4::varchar[], $5::varchar[], $6::jsonb[])"
)

_EFFECTS_UNNEST = (
    "INSERT INTO funnel_outbox (workspace_id, run_id, contact_id, node_id, channel, "
    "idempotency_key, payload, next_attempt_at, status, attempts, created_at) "
    "SELECT *, $9::varchar, 0, $10::timestamptz FROM unnest($1::bigint[], $2::bigint[], "
    "$3::bigint[], $4::varchar[], $5::varchar[], $6::varchar[], $7::jsonb[], $8::timestamptz[]) "
    "ON CONFLICT DO NOTHING"
)
"""An effect already written (its idempotency key) is skipped, as the executemany's
``ON CONFLICT DO NOTHING`` skips it."""

_ADVANCE_UNNEST = (
    "UPDATE funnel_runs AS r SET status = v.status, current_node = v.current_node, "
    "wake_at = v.wake_at, context = v.context, waiting_event = v.waiting_event, "
    "woken_by = v.woken_by, step_count = v.step_count, failures = v.failures, "
    "last_error = v.last_error, ended_at = v.ended_at, exit_reason = v.exit_reason, "
    "updated_at = $13, lease_owner = NULL, lease_until = NULL "
    "FROM unnest($1::bigint[], $2::varchar[], $3::varchar[], $4::timestamptz[], $5::jsonb[], "
    "$6::varchar[], $7::varchar[], $8::integer[], $9::integer[], $10::text[], "
    "$11::timestamptz[], $12::varchar[]) "
    "AS v(rid, status, current_node, wake_at, context, waiting_event, woken_by, step_count, "
    "failures, last_error, ended_at, exit_reason) "
    "WHERE r.id = v.rid"
)


async def write_batch(
    session: WriteSession,
    steps: list[dict[str, Any]],
    effects: list[dict[str, Any]],
    advances: list[dict[str, Any]],
    now: datetime,
) -> None:
    """Insert ``steps`` (taken at ``now``) and ``effects`` (outbox rows, created pending at
    ``now``; one already written is skipped) and apply ``advances`` (``rid`` and the
    :data:`ADVANCED` columns), releasing each run's lease."""
    if steps:
        at = {"at": now}
        await execute_rows(
            session,
            insert(session, STEP_TABLE),
            [{**row, **at} for row in steps],
            lambda: ColumnArrays(_STEPS_UNNEST, (*_step_columns(steps), utc(now))),
        )
    if effects:
        created = {**_PENDING, "attempts": 0, "created_at": now}
        await execute_rows(
            session,
            insert(session, OutboxEffect).on_conflict_do_nothing(),
            [{**row, **created} for row in effects],
            lambda: ColumnArrays(
                _EFFECTS_UNNEST, (*_effect_columns(effects), _PENDING["status"], utc(now))
            ),
        )
    if not advances:
        return
    released = {"updated_at": now, "lease_owner": None, "lease_until": None}
    await execute_rows(
        session,
        ADVANCE,
        [{**row, **released} for row in advances],
        lambda: ColumnArrays(_ADVANCE_UNNEST, (*_advance_columns(advances), utc(now))),
    )


def _step_columns(steps: list[dict[str, Any]]) -> tuple[list[Any], ...]:
    return (
        [s["run_id"] for s in steps],
        [s["seq"] for s in steps],
        [s["node_id"] for s in steps],
        [s["kind"] for s in steps],
        [s["decision"] for s in steps],
        [json_text(s["output"]) for s in steps],
    )


def _effect_columns(effects: list[dict[str, Any]]) -> tuple[list[Any], ...]:
    return (
        [e["workspace_id"] for e in effects],
        [e["run_id"] for e in effects],
        [e["contact_id"] for e in effects],
        [e["node_id"] for e in effects],
        [e["channel"] for e in effects],
        [e["idempotency_key"] for e in effects],
        [json_text(e["payload"]) for e in effects],
        [utc_or_none(e["next_attempt_at"]) for e in effects],
    )


def _advance_columns(advances: list[dict[str, Any]]) -> tuple[list[Any], ...]:
    return (
        [a["rid"] for a in advances],
        [a["status"] for a in advances],
        [a["current_node"] for a in advances],
        [utc_or_none(a["wake_at"]) for a in advances],
        [json_text(a["context"]) for a in advances],
        [a["waiting_event"] for a in advances],
        [a["woken_by"] for a in advances],
        [a["step_count"] for a in advances],
        [a["failures"] for a in advances],
        [a["last_error"] for a in advances],
        [utc_or_none(a["ended_at"]) for a in advances],
        [a["exit_reason"] for a in advances],
    )
