"""``alembic check`` as a command (issue 31, item 8): ``python -m app check-schema`` exits 0 when
the migrated database is what the models declare, and 1 listing each difference, or saying the
database is behind the migrations. CI runs it on a fresh SQLite file and a scratch PostgreSQL
database (``.ci/schema-check``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.migrate import describe_difference, schema_drift, upgrade
from app.models import metadata
from app.settings import Settings


def check_schema(url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "app", "check-schema"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def test_the_migrated_test_database_matches_the_models(settings: Settings) -> None:
    """The test database (SQLite, or PostgreSQL in server mode) was built by the migrations;
    nothing differs from the models, ``bulk_jobs.source`` nullability included."""
    assert await schema_drift(settings.database.url, metadata) == []
    done = check_schema(settings.database.url)
    assert done.returncode == 0, done.stderr
    assert "matches the models" in done.stdout


@pytest.fixture(scope="module")
async def migrated_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('schema') / 'drift.db'}"
    await upgrade(url)
    return url


async def test_drift_is_listed_and_fails_the_command(migrated_file: str) -> None:
    engine = create_async_engine(migrated_file)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE bulk_jobs ADD COLUMN stray TEXT"))
            await conn.execute(text("CREATE TABLE leftover (id INTEGER PRIMARY KEY)"))
    finally:
        await engine.dispose()
    drift = await schema_drift(migrated_file, metadata)
    assert sorted(drift) == [
        "bulk_jobs: column stray is in the database, not in the models",
        "table leftover is in the database, not in the models",
    ]
    done = check_schema(migrated_file)
    assert done.returncode == 1
    assert "differs from the models (2)" in done.stderr
    for line in drift:
        assert line in done.stderr


async def test_a_database_behind_the_migrations_fails_the_command(tmp_path: Path) -> None:
    done = check_schema(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    assert done.returncode == 1
    assert "out of date" in done.stderr
    assert "python -m app migrate" in done.stderr


def test_a_changed_nullability_reads_as_a_sentence() -> None:
    """The drift the issue found, as the command prints it."""
    diff: list[Any] = [("modify_nullable", None, "bulk_jobs", "source", {}, False, True)]
    assert describe_difference(diff) == [
        "bulk_jobs.source: nullable is False in the database, True in the models"
    ]
