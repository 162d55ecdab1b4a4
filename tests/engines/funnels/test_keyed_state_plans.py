"""Statements that find their rows by key read them by key, whatever the planner's statistics say.

The adverse case, as it happens in service: the statistics were taken when almost every effect
had been sent and every run had ended (a quiet hour), then a burst makes thousands pending or
active. A statement such as ``id = ANY(…) AND status = 'pending'`` then looks cheapest through the
partial index of pending effects — which now holds the whole burst — and reads all of it to find
its few ids. Each statement the delivery and the runner write by key is captured as it really
runs, then explained on this database with the same parameters: its plan must use the primary
key and no partial index of the states it guards (``StateMachine.where_keyed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import event, insert, text, update

from app.engines.funnels.models import (
    OUTBOX_PENDING,
    OUTBOX_SENT,
    RUN_ACTIVE,
    OutboxEffect,
    Run,
)
from app.engines.funnels.outbox.channel import LeasedEffect
from app.engines.funnels.outbox.claim.lease import DELIVERY, still_ours
from app.engines.funnels.outbox.records.outcomes import record
from app.engines.funnels.outbox.work.outcomes import Outcome
from app.engines.funnels.runs.claim.lease import held_runs
from app.engines.funnels.runs.states import RUN_COMPLETED
from app.runtime import Runtime
from app.settings import FunnelSettings
from tests.engines.funnels.factories import bulk_contacts, contact, graph, node, published
from tests.factories import Tenant

ROWS = 2_000
BURST = 1_500
OWNER = "deliverer-1"
PARTIAL = {"funnel_outbox": "ix_funnel_outbox_due", "funnel_runs": "ix_funnel_runs_due"}
PRIMARY = {"funnel_outbox": "pk_funnel_outbox", "funnel_runs": "pk_funnel_runs"}


class _RecordingDriver:
    """A driver connection that notes each statement sent straight to it."""

    def __init__(self, driver: Any, seen: list[tuple[str, Any]]) -> None:
        self._driver = driver
        self._seen = seen

    async def fetch(self, statement: str, *args: Any) -> Any:
        self._seen.append((statement, args))
        return await self._driver.fetch(statement, *args)


@contextmanager
def statements_run(runtime: Runtime) -> Iterator[list[tuple[str, Any]]]:
    """Every statement sent to the database meanwhile, with its parameters: through the SQL
    layer, and straight to the driver (one-statement writes, app/db/lone_statement.py)."""
    seen: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        seen.append((statement, parameters))

    lone = runtime.db.lone_connections
    straight = lone.driver

    @asynccontextmanager
    async def recorded() -> AsyncIterator[Any]:
        async with straight() as driver:
            yield _RecordingDriver(driver, seen)

    engines = [engine.sync_engine for engine in runtime.db.engines]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", keep)
    lone.driver = recorded  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del lone.driver
        for engine in engines:
            event.remove(engine, "before_cursor_execute", keep)


async def plan_of(runtime: Runtime, statement: str, parameters: Any) -> str:
    explain = "EXPLAIN " if runtime.db.is_postgres else "EXPLAIN QUERY PLAN "
    async with runtime.db.write_engine.connect() as conn:
        rows = (await conn.exec_driver_sql(explain + statement, parameters)).all()
        await conn.rollback()
    return "\n".join(" ".join(str(c) for c in row) for row in rows)


async def quiet_then_burst(runtime: Runtime, table: Any, due: dict[str, Any]) -> list[int]:
    """``table``'s rows (already inserted, all finished) analysed as they are, then the last
    ``BURST`` of them moved to ``due``; the moved ids."""
    async with runtime.db.write() as uow:
        await uow.session.execute(text(f"ANALYZE {table.name}"))
    async with runtime.db.write() as uow:
        ids = list(await uow.session.scalars(text(f"SELECT id FROM {table.name} ORDER BY id")))
        moved = ids[ROWS - BURST :]
        await uow.session.execute(update(table).where(table.c.id.in_(moved)).values(**due))
    assert len(ids) == ROWS
    return moved


async def assert_keyed(runtime: Runtime, seen: list[tuple[str, Any]], table: str) -> None:
    writes = [(s, p) for s, p in seen if table in s and not s.lstrip().upper().startswith("INSERT")]
    assert writes, f"no statement on {table} was captured"
    for statement, parameters in writes:
        plan = await plan_of(runtime, statement, parameters)
        assert PARTIAL[table] not in plan, f"{statement}\n{plan}"
        if runtime.db.is_postgres:
            assert PRIMARY[table] in plan, f"{statement}\n{plan}"


async def test_delivery_records_and_renews_by_key_after_a_quiet_hour(
    runtime: Runtime, tenant: Tenant
) -> None:
    now = runtime.clock.now()
    ws = tenant.workspace_id
    person = await contact(runtime, ws, "burst@example.com")
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(OutboxEffect.__table__),  # type: ignore[arg-type]
            [
                {
                    "workspace_id": ws,
                    "contact_id": person,
                    "node_id": "mail",
                    "channel": "email",
                    "idempotency_key": f"quiet-{i}",
                    "payload": {},
                    "status": OUTBOX_SENT,
                    "attempts": 1,
                    "next_attempt_at": now,
                    "created_at": now,
                    "finished_at": now,
                }
                for i in range(ROWS)
            ],
        )
    leased = now + timedelta(minutes=5)
    moved = await quiet_then_burst(
        runtime,
        OutboxEffect.__table__,
        {"status": OUTBOX_PENDING, "lease_owner": OWNER, "next_attempt_at": leased},
    )
    # Recording and renewing never read the payload.
    batch = [LeasedEffect(i, ws, person, "email", "", {}, 1) for i in moved[:7]]  # type: ignore[arg-type]

    with statements_run(runtime) as seen:
        async with runtime.db.read() as session:
            assert await still_ours(session, batch, OWNER, now) == {e.id for e in batch}
        assert await DELIVERY.renew(
            runtime.db, [e.id for e in batch], owner=OWNER, now=now, lease_seconds=60
        ) == {e.id for e in batch}
        sent = [Outcome(e, "sent", now, OUTBOX_SENT, "sent") for e in batch]
        await record(runtime.db, FunnelSettings(), sent, OWNER, now, ({}, [], now))
    if runtime.db.is_postgres:
        assert any("WITH sent" in stmt for stmt, _ in seen), "not written alone"
    await assert_keyed(runtime, seen, "funnel_outbox")


async def test_the_runner_reads_its_leased_runs_by_key_after_a_quiet_hour(
    runtime: Runtime, tenant: Tenant
) -> None:
    now = runtime.clock.now()
    ws = tenant.workspace_id
    funnel_id, version = await published(runtime, ws, graph(node("wait", "w", days=1)))
    people = await bulk_contacts(runtime, ws, ROWS)
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(Run.__table__),  # type: ignore[arg-type]
            [
                {
                    "workspace_id": ws,
                    "funnel_id": funnel_id,
                    "version_id": version.id,
                    "contact_id": person,
                    "reentry": False,
                    "status": RUN_COMPLETED,
                    "current_node": "w",
                    "context": {},
                    "step_count": 1,
                    "failures": 0,
                    "entered_at": now,
                    "updated_at": now,
                    "ended_at": now,
                }
                for person in people
            ],
        )
    moved = await quiet_then_burst(
        runtime,
        Run.__table__,
        {"status": RUN_ACTIVE, "lease_owner": OWNER, "wake_at": now, "ended_at": None},
    )
    with statements_run(runtime) as seen:
        async with runtime.db.write() as uow:
            assert [r.id for r in await held_runs(uow.session, moved[:7], OWNER)] == moved[:7]
    await assert_keyed(runtime, seen, "funnel_runs")
