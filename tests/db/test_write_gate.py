"""SQLite's write lock goes to one process's writers in the order they asked for it, requests and
the background taking turns, and the line never holds a writer for ever (app/db/write_gate.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.db.session import Database
from app.db.write_gate import WriteGate, background_context
from app.settings import Settings
from tests.conftest import eventually, is_postgres

pytestmark = pytest.mark.skipif(is_postgres(), reason="the SQLite write lock")


async def _db(settings: Settings, path: Path, busy_timeout_ms: int) -> Database:
    database = dataclasses.replace(
        settings.database, url=f"sqlite+aiosqlite:///{path}", busy_timeout_ms=busy_timeout_ms
    )
    db = Database(database)
    async with db.write() as uow:
        await uow.session.execute(text("CREATE TABLE IF NOT EXISTS written (who TEXT)"))
    return db


@pytest.fixture
async def db(settings: Settings, tmp_path: Path) -> AsyncIterator[Database]:
    db = await _db(settings, tmp_path / "gate.db", busy_timeout_ms=5000)
    yield db
    await db.dispose()


def gate_of(db: Database) -> WriteGate:
    assert db.write_gate is not None
    return db.write_gate


async def _written(db: Database) -> list[str]:
    async with db.read() as session:
        return list((await session.scalars(text("SELECT who FROM written ORDER BY rowid"))).all())


async def _hold(db: Database, holding: asyncio.Event, release: asyncio.Event) -> None:
    """A write transaction that holds the lock from ``holding`` until ``release``."""
    async with db.write() as uow:
        await uow.session.execute(text("INSERT INTO written VALUES ('holder')"))
        holding.set()
        await release.wait()


async def _write(db: Database, name: str) -> None:
    async with db.write() as uow:
        await uow.session.execute(text("INSERT INTO written VALUES (:who)"), {"who": name})


async def test_writers_get_the_lock_in_the_order_they_asked(db: Database) -> None:
    gate = gate_of(db)
    holding, release = asyncio.Event(), asyncio.Event()

    first = asyncio.create_task(_hold(db, holding, release))
    await holding.wait()
    names = [f"w{i}" for i in range(8)]
    tasks = []
    for position, name in enumerate(names, start=1):
        tasks.append(asyncio.create_task(_write(db, name)))
        await eventually(lambda n=position: _true(gate.waiting == n))  # in line, behind the rest
    release.set()
    await asyncio.gather(first, *tasks)
    assert await _written(db) == ["holder", *names]
    assert (gate.waiting, gate.holders) == (0, 0)


async def _in_line(
    db: Database, holder_in_background: bool, writers: list[tuple[str, bool]]
) -> list[str]:
    """A holder of the lock, then ``writers`` (name, in the background?) queued one after the
    other behind it; the order in which they wrote once the holder let go."""
    gate = gate_of(db)
    holding, release = asyncio.Event(), asyncio.Event()

    def start(coro: Any, background: bool) -> asyncio.Task[None]:
        if background:
            return asyncio.create_task(coro, context=background_context())
        return asyncio.create_task(coro)

    first = start(_hold(db, holding, release), holder_in_background)
    await holding.wait()
    tasks = []
    for position, (name, background) in enumerate(writers, start=1):
        tasks.append(start(_write(db, name), background))
        await eventually(lambda n=position: _true(gate.waiting == n))
    release.set()
    await asyncio.gather(first, *tasks)
    assert (gate.waiting, gate.holders) == (0, 0)
    return await _written(db)


async def test_a_request_waits_for_at_most_one_background_transaction(db: Database) -> None:
    """Three background transactions wait behind a fourth, then two requests ask: the first
    request writes as soon as the holder is done, the second after one background transaction,
    not after all three."""
    order = await _in_line(
        db,
        holder_in_background=True,
        writers=[("bg1", True), ("bg2", True), ("bg3", True), ("r1", False), ("r2", False)],
    )
    assert order == ["holder", "r1", "bg1", "r2", "bg2", "bg3"]


async def test_the_background_gets_every_other_turn(db: Database) -> None:
    """Requests keep arriving: the background still writes every other turn."""
    order = await _in_line(
        db,
        holder_in_background=False,
        writers=[("r1", False), ("r2", False), ("r3", False), ("bg1", True), ("bg2", True)],
    )
    assert order == ["holder", "bg1", "r1", "bg2", "r2", "r3"]


@pytest.fixture
async def patient_db(settings: Settings, tmp_path: Path) -> AsyncIterator[Database]:
    """A minute's patience in line: a turn lost in the gate holds the next writer past a test's
    ten seconds, instead of letting it go on without the gate after the usual five."""
    db = await _db(settings, tmp_path / "gate.db", busy_timeout_ms=60_000)
    yield db
    await db.dispose()


async def test_a_writer_that_stops_waiting_leaves_the_line(patient_db: Database) -> None:
    """One writer is cancelled while in line, another just as its turn came: the turn goes on
    to the next writer instead of being lost with them."""
    db = patient_db
    gate = gate_of(db)
    holding, release = asyncio.Event(), asyncio.Event()
    waiting: list[asyncio.Task[None]] = []

    def cancel_the_next() -> None:
        # In the same step as the holder's commit hands the turn to "given", before its task
        # can run again: cancelled just as its turn came, however busy the machine.
        if release.is_set() and not waiting[1].done():
            waiting[1].cancel()

    gate.on_leave.append(cancel_the_next)
    first = asyncio.create_task(_hold(db, holding, release))
    await holding.wait()
    waiting += [asyncio.create_task(_write(db, name)) for name in ("cancelled", "given", "last")]
    await eventually(lambda: _true(gate.waiting == 3))
    waiting[0].cancel()
    await eventually(lambda: _true(gate.waiting == 2))
    release.set()
    await first
    async with asyncio.timeout(10):
        await waiting[2]
    for task in waiting[:2]:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await _written(db) == ["holder", "last"]
    assert (gate.waiting, gate.holders) == (0, 0)


async def test_a_failed_transaction_leaves_the_gate(db: Database) -> None:
    gate = gate_of(db)
    held: list[int] = []

    async def fails() -> None:
        async with db.write() as uow:
            await uow.session.execute(text("INSERT INTO written VALUES ('rolled back')"))
            held.append(gate.holders)
            raise RuntimeError("the unit of work fails")

    with pytest.raises(RuntimeError):
        await fails()
    assert (held, gate.holders) == ([1], 0)
    async with db.write() as uow:
        await uow.session.execute(text("INSERT INTO written VALUES ('next')"))
    assert await _written(db) == ["next"]


async def test_the_line_never_holds_a_writer_for_ever(settings: Settings, tmp_path: Path) -> None:
    """A transaction of the process that keeps the lock past the patience (the busy timeout):
    the writer behind it goes on to SQLite, which answers "database is locked" as it always did —
    an error the web layer turns into a 503 — instead of waiting without end."""
    db = await _db(settings, tmp_path / "patience.db", busy_timeout_ms=200)
    holding, release = asyncio.Event(), asyncio.Event()

    first = asyncio.create_task(_hold(db, holding, release))
    try:
        await holding.wait()
        with pytest.raises(OperationalError, match="database is locked"):
            async with db.write() as uow:
                await uow.session.execute(text("INSERT INTO written VALUES ('impatient')"))
    finally:
        release.set()
        await first
    async with db.write() as uow:
        await uow.session.execute(text("INSERT INTO written VALUES ('later')"))
    assert await _written(db) == ["holder", "later"]
    await db.dispose()


async def _true(value: bool) -> bool:
    return value
