"""Migrations apply from an empty database, and server mode refuses an out-of-date schema."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import inspect

from app.db.migrate import SchemaOutOfDate, check_current, current_heads, expected_heads, upgrade
from app.db.session import Database
from app.models import metadata
from app.runtime import build_runtime
from app.settings import Settings
from tests.conftest import TEST_DATABASE_URL, _create_pg_database, _drop_pg_database, is_postgres

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def empty_database_url(tmp_path: Path) -> AsyncIterator[str]:
    """A brand-new database of the session's kind, with no tables at all."""
    if is_postgres():
        url = await _create_pg_database(TEST_DATABASE_URL)
        yield url
        await _drop_pg_database(url)
    else:
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"


def _settings_on(settings: Settings, url: str) -> Settings:
    database = dataclasses.replace(settings.database, url=url)
    queue = dataclasses.replace(settings.queue, redis_url="")
    return dataclasses.replace(settings, database=database, queue=queue)


async def test_migrations_build_every_table_from_an_empty_database(
    settings: Settings, empty_database_url: str
) -> None:
    db = Database(_settings_on(settings, empty_database_url).database)
    try:
        with pytest.raises(SchemaOutOfDate):
            await check_current(db.write_engine)
        await upgrade(empty_database_url)
        await check_current(db.write_engine)
        assert await current_heads(db.write_engine) == expected_heads()
        async with db.write_engine.connect() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        assert {"jobs", "sweeper_state"} <= tables
        assert set(metadata.tables) <= tables, "every model has its table"
        await upgrade(empty_database_url)  # running it again at start is harmless
    finally:
        await db.dispose()


async def test_server_mode_refuses_an_out_of_date_schema_with_a_clear_message(
    settings: Settings, empty_database_url: str
) -> None:
    from app.web.app import prepare_database

    runtime = build_runtime(_settings_on(settings, empty_database_url))
    try:
        if runtime.settings.database.is_sqlite:
            # The embedded default migrates by itself instead.
            await prepare_database(runtime)
            await check_current(runtime.db.write_engine)
            return
        with pytest.raises(SchemaOutOfDate, match=r"Run `python -m app migrate`") as refused:
            await prepare_database(runtime)
        assert "database at empty" in str(refused.value)
    finally:
        await runtime.aclose()


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_the_commands_exit_with_the_message_on_an_out_of_date_schema(
    settings: Settings, empty_database_url: str, command: str
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": empty_database_url,
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "REDIS_URL": "",
        "PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", command],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "Run `python -m app migrate` before starting the service." in done.stderr.decode()
