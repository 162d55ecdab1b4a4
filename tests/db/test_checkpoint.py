"""SQLite's log is checkpointed in the background, not inside a commit (app/db/checkpoint.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.db.checkpoint import AUTOCHECKPOINT_PAGES, WalCheckpointer
from app.db.session import Database
from app.runtime import build_runtime
from app.settings import Settings
from tests.conftest import eventually, is_postgres

pytestmark = pytest.mark.skipif(is_postgres(), reason="SQLite's write-ahead log")

PAGE = 4096


@pytest.fixture
async def db(settings: Settings, tmp_path: Path) -> AsyncIterator[Database]:
    database = dataclasses.replace(settings.database, url=f"sqlite+aiosqlite:///{tmp_path}/c.db")
    db = Database(database)
    async with db.write() as uow:
        await uow.session.execute(text("CREATE TABLE blobs (body BLOB)"))
    yield db
    await db.dispose()


async def write_pages(db: Database, commits: int, pages_each: int) -> None:
    for _ in range(commits):
        async with db.write() as uow:
            await uow.session.execute(
                text("INSERT INTO blobs VALUES (randomblob(:n))"), {"n": pages_each * PAGE}
            )


async def test_every_connection_leaves_checkpoints_to_the_background(db: Database) -> None:
    for engine in db.engines:
        async with engine.connect() as conn:
            pages = await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")
            assert pages.scalar() == AUTOCHECKPOINT_PAGES


async def test_commits_past_sqlites_default_threshold_do_not_checkpoint(db: Database) -> None:
    """2,000 pages in 20 commits: with SQLite's default (1,000) one of them would have copied the
    log back and the log would have started over; here the log still holds every page, and one
    background checkpoint copies them all."""
    checkpointer = WalCheckpointer(db.read_engine)
    try:
        await checkpointer.checkpoint()
        await write_pages(db, commits=20, pages_each=100)
        done = await checkpointer.checkpoint()
    finally:
        await checkpointer.aclose()
    assert done.log_frames >= 2000
    assert done.checkpointed_frames == done.log_frames
    assert not done.busy


async def test_the_checkpointer_keeps_the_log_copied_while_it_runs(db: Database) -> None:
    checkpointer = WalCheckpointer(db.read_engine, interval_seconds=0.02)
    task = asyncio.create_task(checkpointer.run())
    try:
        await write_pages(db, commits=5, pages_each=10)

        async def caught_up() -> bool:
            last = checkpointer.last
            return (
                last is not None
                and last.log_frames > 0
                and not last.busy
                and (last.checkpointed_frames == last.log_frames)
            )

        await eventually(caught_up)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert checkpointer._conn is None  # its connection went back when it stopped


async def test_the_runtime_runs_the_checkpointer_until_it_stops(
    settings: Settings, tmp_path: Path
) -> None:
    database = dataclasses.replace(settings.database, url=f"sqlite+aiosqlite:///{tmp_path}/r.db")
    runtime = build_runtime(dataclasses.replace(settings, database=database))
    runtime.start_database_upkeep()
    runtime.start_database_upkeep()  # once per process
    upkeep = runtime._upkeep
    assert upkeep is not None
    assert not upkeep.done()
    await runtime.aclose()
    assert upkeep.done()
    assert runtime._upkeep is None
