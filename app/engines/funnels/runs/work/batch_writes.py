"""A runner batch's writes: its step rows, outbox rows and run advances, one statement each, in
the batch's transaction (FN-6 to FN-8).

On PostgreSQL each goes to the driver as one JSON document of its rows, read by the statement with
``jsonb_to_recordset``, in the session's own transaction. A profile of a 20,000-run drain put the
SQL layer's per-row parameter handling of the executemanys at about a quarter of the runner's CPU;
one array per column (``unnest``) took most of that away, but the driver still checked and encoded
each of a run's forty-odd array elements one by one (a time the dearest). msgspec writes the rows
as one document in C, and PostgreSQL reads it: the runner spent about a tenth less CPU a run. The
statements are fixed texts, prepared once per connection by the driver's statement cache
(:mod:`app.db.column_arrays` picks the spelling). Elsewhere (SQLite) they are the SQL layer's
executemanys.

What is the same for the whole batch is a single value, not a field of every row: a batch's steps
happen at its time, its effects are created pending at its time with no attempt made.
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

_STEPS_ROWS = (
    "INSERT INTO funnel_steps (run_id, seq, node_id, kind, decision, output, at) "
    "SELECT *, $2::timestamptz FROM jsonb_to_recordset($1::jsonb) AS s(run_id bigint, "
    "seq integer, node_id varchar, kind varchar, decision varchar, output jsonb)"
)

_EFFECTS_ROWS = (
    "INSERT INTO funnel_outbox (workspace_id, run_id, contact_id, node_id, channel, "
    "idempotency_key, payload, next_attempt_at, status, attempts, created_at) "
    "SELECT *, $2::varchar, 0, $3::timestamptz FROM jsonb_to_recordset($1::jsonb) AS "
    "e(workspace_id bigint, run_id bigint, contact_id bigint, node_id varchar, channel varchar, "
    "idempotency_key varchar, payload jsonb, next_attempt_at timestamptz) "
    "ON CONFLICT DO NOTHING"
)
"""An effect already written (its idempotency key) is skipped, as the executemany's
``ON CONFLICT DO NOTHING`` skips it."""

_ADVANCE_ROWS = (
    "UPDATE funnel_runs AS r SET status = v.status, current_node = v.current_node, "
    "wake_at = v.wake_at, context = v.context, waiting_event = v.waiting_event, "
    "woken_by = v.woken_by, step_count = v.step_count, failures = v.failures, "
    "last_error = v.last_error, ended_at = v.ended_at, exit_reason = v.exit_reason, "
    "updated_at = $2, lease_owner = NULL, lease_until = NULL "
    "FROM jsonb_to_recordset($1::jsonb) AS v(rid bigint, status varchar, current_node varchar, "
    "wake_at timestamptz, context jsonb, waiting_event varchar, woken_by varchar, "
    "step_count integer, failures integer, last_error text, ended_at timestamptz, "
    "exit_reason varchar) "
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
            ({**row, **at} for row in steps),
            lambda: ColumnArrays(_STEPS_ROWS, (json_text(steps), utc(now))),
        )
    if effects:
        created = {**_PENDING, "attempts": 0, "created_at": now}
        await execute_rows(
            session,
            insert(session, OutboxEffect).on_conflict_do_nothing(),
            ({**row, **created} for row in effects),
            lambda: ColumnArrays(
                _EFFECTS_ROWS,
                (json_text(_in_utc(effects, "next_attempt_at")), _PENDING["status"], utc(now)),
            ),
        )
    if not advances:
        return
    released = {"updated_at": now, "lease_owner": None, "lease_until": None}
    await execute_rows(
        session,
        ADVANCE,
        ({**row, **released} for row in advances),
        lambda: ColumnArrays(
            _ADVANCE_ROWS, (json_text(_in_utc(advances, "wake_at", "ended_at")), utc(now))
        ),
    )


def _in_utc(rows: list[dict[str, Any]], *times: str) -> list[dict[str, Any]]:
    """``rows`` with their ``times`` in UTC. PostgreSQL would read a time written without an
    offset in the connection's zone: a naive one is refused here instead, as the column's own
    type refuses it on SQLite."""
    return [{**row, **{t: utc_or_none(row[t]) for t in times}} for row in rows]
