"""The ad rules models and the 0100 migration describe the same schema."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.models import metadata
from app.runtime import Runtime


async def test_models_match_the_migration(runtime: Runtime) -> None:
    def diff(conn):
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(ctx, metadata)

    async with runtime.db.write_engine.connect() as conn:
        changes = await conn.run_sync(diff)
    ours = [c for c in changes if "adrules" in repr(c)]
    assert ours == []
