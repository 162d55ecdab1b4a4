"""The models match the 0300 migration exactly (columns, types, indexes, constraints)."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.models import metadata
from app.runtime import Runtime


def _table_of(diff: Any) -> str:
    item = diff[0] if isinstance(diff, list) else diff
    for part in item[1:]:
        name = getattr(part, "name", None)
        table = getattr(part, "table", None)
        if table is not None and getattr(table, "name", None):
            return str(table.name)
        if isinstance(part, str) and part.startswith("rt_"):
            return part
        if name and str(name).startswith("rt_"):
            return str(name)
    return ""


async def test_models_match_the_migration(runtime: Runtime) -> None:
    def diffs(conn: Any) -> list[Any]:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return [d for d in compare_metadata(ctx, metadata) if _table_of(d).startswith("rt_")]

    async with runtime.db.write_engine.connect() as conn:
        found = await conn.run_sync(diffs)
    assert found == []
