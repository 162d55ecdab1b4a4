"""Apply and check Alembic migrations (the only way the schema changes).

Each engine's migrations form their own branch on top of the platform's, so ``heads`` (plural) is
the target; the same files run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import private_sqlite_file

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


class SchemaOutOfDate(RuntimeError):
    """The database schema is behind the code."""


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["url"] = url
    return cfg


def expected_heads() -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config("")).get_heads())


async def upgrade(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (safe to run at every start)."""
    private_sqlite_file(url)
    # Alembic's env.py runs its own event loop; give it a thread.
    await asyncio.to_thread(command.upgrade, alembic_config(url), "heads")


async def current_heads(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        heads = await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_heads())
    return set(heads)


async def check_current(engine: AsyncEngine) -> None:
    """Raise :class:`SchemaOutOfDate` with a clear message when migrations are missing."""
    have, want = await current_heads(engine), expected_heads()
    if have != want:
        missing = ", ".join(sorted(want - have)) or "none"
        raise SchemaOutOfDate(
            "The database schema is out of date "
            f"(database at {', '.join(sorted(have)) or 'empty'}; missing {missing}). "
            "Run `python -m app migrate` before starting the service."
        )
