"""Alembic environment. The URL comes from ``config.attributes["url"]`` (set by app.db.migrate)."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from app.models import metadata

config = context.config


def _configure(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run() -> None:
    engine = create_async_engine(config.attributes["url"])
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_configure)
            await conn.commit()
    finally:
        await engine.dispose()


asyncio.run(_run())
