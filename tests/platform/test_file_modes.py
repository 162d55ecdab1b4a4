"""The embedded default's files hold secrets (the key file) and everything else (the SQLite
database): they are created readable by their owner only, and looser existing files are
tightened at start."""

from __future__ import annotations

import asyncio
import stat
import sys
from pathlib import Path

from sqlalchemy import text

from app.db.migrate import upgrade
from app.db.session import Database
from app.platform.crypto import load_or_create_keys
from app.settings import DatabaseSettings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_database_file_is_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "var" / "fresh.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade(url)
    assert mode(path) == 0o600
    db = Database(DatabaseSettings(url=url))
    async with db.write() as uow:
        await uow.session.execute(text("SELECT 1"))
    await db.dispose()
    for extra in (path.with_name("fresh.db-wal"), path.with_name("fresh.db-shm")):
        if extra.exists():
            assert mode(extra) == 0o600, extra


async def test_an_existing_world_readable_database_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    path.touch(mode=0o644)
    path.chmod(0o644)
    await upgrade(f"sqlite+aiosqlite:///{path}")
    assert mode(path) == 0o600


async def test_opening_a_second_engine_keeps_the_first_connections_locks(tmp_path: Path) -> None:
    """SQLite's POSIX locks are lost when the process closes any descriptor of the file: if
    building a second engine opened and closed it, another process closing its last connection
    would delete the -wal and -shm files under the first engine's live connection."""
    path = tmp_path / "shared.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade(url)
    first = Database(DatabaseSettings(url=url))
    try:
        async with first.read_engine.connect() as conn:
            await conn.execute(text("SELECT count(*) FROM alembic_version"))
            second = Database(DatabaseSettings(url=url))
            await second.dispose()
            other = await asyncio.create_subprocess_exec(
                sys.executable, "-c", OPEN_AND_CLOSE, str(path)
            )
            assert await other.wait() == 0
            assert path.with_name("shared.db-shm").exists(), "the live connection's files stay"
            await conn.execute(text("SELECT count(*) FROM alembic_version"))
    finally:
        await first.dispose()


OPEN_AND_CLOSE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM alembic_version").fetchall()
conn.close()
"""


def test_the_key_file_is_created_0600_and_tightened(tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "sweepline.key"
    load_or_create_keys("", "", str(key_file), allow_generate=True)
    assert mode(key_file) == 0o600
    key_file.chmod(0o644)
    load_or_create_keys("", "", str(key_file), allow_generate=True)
    assert mode(key_file) == 0o600
