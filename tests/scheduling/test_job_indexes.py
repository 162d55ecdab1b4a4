"""The queries that read finished jobs, or count jobs by state, are served by the job table's
partial indexes, never by a scan of the whole table (the purge's backlog of done jobs included).

Each statement is the one the code runs, planned the way it runs: on SQLite ``EXPLAIN QUERY
PLAN`` with its parameters bound; on PostgreSQL a prepared statement's generic plan (asyncpg
prepares every statement, and a generic plan knows no parameter's value, so only a state written
as literal SQL lets the planner prove a partial index's predicate).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import ClauseElement, insert, text
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from app.db.chunked import chunk_delete, chunk_selection
from app.db.session import Database
from app.scheduling.attempts import expired_leases
from app.scheduling.dead_jobs import listing
from app.scheduling.dead_rows import dead_listing
from app.scheduling.job_owners import SETTLE_BATCH, UNSETTLED, Viewer
from app.scheduling.models import (
    JOB_DEAD,
    JOB_DISCARDED,
    JOB_DONE,
    JOB_QUEUED,
    JOB_RUNNING,
    Job,
)
from app.scheduling.queue import STATS, done_before

ROWS = {JOB_DONE: 3000, JOB_QUEUED: 800, JOB_RUNNING: 200, JOB_DEAD: 600, JOB_DISCARDED: 400}
WORKSPACES = 20
DONE = "ix_jobs_done_finished"
ENDED = {"ix_jobs_ended_finished", "ix_jobs_ended_workspace"}


def _rows(now: datetime) -> Iterator[dict[str, Any]]:
    n = 0
    for status, count in ROWS.items():
        for i in range(count):
            n += 1
            ended = status in (JOB_DONE, JOB_DEAD, JOB_DISCARDED)
            yield {
                "id": f"job-{n}",
                "name": "test.noop",
                "queue": "default",
                "priority": 0,
                "payload": b"{}",
                "status": status,
                "attempts": 1,
                "max_tries": 3,
                "run_at": now - timedelta(minutes=i % 90),
                "lease_expires_at": now + timedelta(seconds=i) if status == JOB_RUNNING else None,
                "leased_by": "host:1:w" if status == JOB_RUNNING else None,
                "created_at": now - timedelta(hours=2),
                "finished_at": now - timedelta(seconds=i) if ended else None,
                "workspace_id": n % WORKSPACES + 1 if status in (JOB_DEAD, JOB_DISCARDED) else None,
                "owner_known": i % 3 != 0,
            }


@pytest.fixture
async def filled(shared_db: Database, start: datetime) -> Database:
    """The jobs table with some thousands of jobs in every state, and fresh statistics."""
    async with shared_db.write() as uow:
        await uow.session.execute(insert(Job), list(_rows(start)))
    async with shared_db.write_engine.connect() as conn:
        if shared_db.is_postgres:
            # A table autovacuum has seen: planner statistics and a visibility map, without
            # which a count of many rows would read the table rather than an index.
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM ANALYZE jobs"))
        else:
            await conn.execute(text("ANALYZE jobs"))
            await conn.commit()
    return shared_db


def _literal(value: Any) -> str:
    """A parameter's value as an argument of ``EXECUTE`` (only the types these statements
    bind)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no literal for {value!r}")


def _bound(statement: ClauseElement, dialect: Dialect) -> tuple[str, list[Any]]:
    """The statement's SQL as the driver gets it, and its parameters in order, processed by
    their types as on execution."""
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    values = compiled.construct_params()
    params = []
    for name in compiled.positiontup or ():
        process = compiled.binds[name].type.bind_processor(dialect)
        value = values[name]
        params.append(process(value) if process else value)
    return str(compiled), params


async def _scans_of_jobs(conn: AsyncConnection, statement: ClauseElement) -> list[str | None]:
    """How each read of ``jobs`` in the statement's plan is made: the index it goes through, or
    None for a scan of the whole table."""
    sql, params = _bound(statement, conn.dialect)
    if conn.dialect.name == "sqlite":
        plan = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", tuple(params))
        scans = []
        for detail in plan.scalars(3).all():
            found = re.match(r"(SCAN|SEARCH) jobs\b(?: USING (?:COVERING )?INDEX (\w+))?", detail)
            if found:
                scans.append(found.group(2))
            elif re.match(r"(SCAN|SEARCH) jobs\b", detail):
                scans.append(None)
        return scans
    # A prepared statement's generic plan, as asyncpg's statements end up with. Scans of the whole
    # table are priced out: on a few thousand rows, and with a ``LIMIT $n`` the generic plan takes
    # to stop after a tenth of the rows, a scan of the table can look as cheap as an index, and
    # which one wins is the table's size, not the query. What the query decides is whether its
    # partial index is usable at all, and the tests name the index they expect, so neither a scan
    # of the table nor a walk of the whole primary key passes.
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    await driver.execute("SET plan_cache_mode = force_generic_plan")
    await driver.execute("SET enable_seqscan = off")
    await driver.execute(f"PREPARE jobs_plan AS {sql}")
    try:
        arguments = f"({', '.join(_literal(p) for p in params)})" if params else ""
        raw = await driver.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE jobs_plan{arguments}")
    finally:
        await driver.execute("DEALLOCATE jobs_plan")
        await driver.execute("RESET plan_cache_mode")
        await driver.execute("RESET enable_seqscan")
    # The application's connections decode json themselves.
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return list(_pg_scans(plan[0]["Plan"]))


def _pg_scans(node: dict[str, Any]) -> Iterator[str | None]:
    kind = node["Node Type"]
    if node.get("Relation Name") == "jobs" and kind != "ModifyTable":
        if kind in ("Index Scan", "Index Only Scan"):
            yield node["Index Name"]
        elif kind == "Bitmap Heap Scan":
            yield from (child.get("Index Name") for child in node.get("Plans", []))
        else:
            yield None
    for child in node.get("Plans", []):
        if child["Node Type"] != "Bitmap Index Scan" or kind != "Bitmap Heap Scan":
            yield from _pg_scans(child)


async def _indexes_used(db: Database, statement: ClauseElement) -> list[str | None]:
    async with db.read_engine.connect() as conn:
        return await _scans_of_jobs(conn, statement)


async def test_the_purge_reads_done_jobs_from_their_own_index(
    filled: Database, start: datetime
) -> None:
    cutoff = start - timedelta(minutes=20)
    chosen = chunk_selection(done_before(cutoff), key=[Job.id])
    assert await _indexes_used(filled, chosen) == [DONE]
    # The chunk's DELETE: its selection from the index, then each chosen row by primary key.
    chunk = chunk_delete(Job.__table__, done_before(cutoff), key=[Job.id])  # type: ignore[arg-type]
    used = await _indexes_used(filled, chunk)
    assert DONE in used
    assert None not in used


@pytest.mark.parametrize("status", [JOB_DEAD, JOB_DISCARDED])
async def test_the_lists_of_dead_jobs_read_the_index_of_ended_jobs(
    filled: Database, status: str
) -> None:
    operator = await _indexes_used(filled, listing(Viewer(1, operator=True), status))
    assert operator
    assert set(operator) <= ENDED
    workspace = await _indexes_used(filled, listing(Viewer(3), status, offset=10))
    assert workspace == ["ix_jobs_ended_workspace"]


async def test_the_queues_dead_jobs_and_the_unsettled_owners_read_the_index_of_ended_jobs(
    filled: Database,
) -> None:
    for statement in (dead_listing(50), UNSETTLED.limit(SETTLE_BATCH)):
        used = await _indexes_used(filled, statement)
        assert used, statement
        assert set(used) <= ENDED, statement


async def test_each_count_of_the_stats_reads_its_states_index(filled: Database) -> None:
    used = await _indexes_used(filled, STATS)
    assert len(used) == 4, used
    queued, running, dead, done = used
    assert (queued, running, done) == ("ix_jobs_leasable", "ix_jobs_running_lease", DONE)
    assert dead in ENDED


async def test_the_expired_leases_are_read_from_the_index_of_running_jobs(
    filled: Database, start: datetime
) -> None:
    used = await _indexes_used(filled, expired_leases(start + timedelta(seconds=30)))
    assert used == ["ix_jobs_running_lease"]
