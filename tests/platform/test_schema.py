"""The platform's models match its migrations exactly (columns, types, indexes, constraints)."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from app.models import metadata

PLATFORM_TABLES = {
    "organisations",
    "workspaces",
    "users",
    "memberships",
    "api_keys",
    "user_sessions",
    "secrets",
    "idempotency_keys",
}


def _table_of(diff: Any) -> str | None:
    for item in diff if isinstance(diff, list) else [diff]:
        for part in item if isinstance(item, tuple) else (item,):
            table = getattr(part, "table", None)
            name = getattr(table, "name", None) or getattr(part, "name", None)
            if isinstance(part, str) and part in PLATFORM_TABLES:
                return part
            if name in PLATFORM_TABLES:
                return str(name)
    return None


async def test_platform_models_match_the_migrations(database_url: str) -> None:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            diffs = await conn.run_sync(
                lambda c: compare_metadata(
                    MigrationContext.configure(c, opts={"compare_type": True}), metadata
                )
            )
    finally:
        await engine.dispose()
    ours = [d for d in diffs if _table_of(d) is not None]
    assert ours == []
