"""Apply and check Alembic migrations (the only way the schema changes).

Each engine's migrations form their own branch on top of the platform's, so ``heads`` (plural) is
the target; the same files run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

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


DRIFT_OPTIONS: dict[str, Any] = {
    "compare_type": True,
    # Not compared: a migration that adds a NOT NULL column to a filled table gives it a server
    # default for the rows already there, which the model has no reason to repeat; and SQLite
    # keeps a default as the text it was written in, so equal defaults would read as different.
    "compare_server_default": False,
}
"""What ``alembic check`` compares (its own defaults), on both databases."""


async def schema_drift(url: str, metadata: MetaData) -> list[str]:
    """What differs between the database at ``url`` and the models, as ``alembic check`` sees
    it: one line per difference, none when the migrations build what the code declares. The
    database is only read. ``metadata`` is every model's (``app.models``, which the database
    layer does not import: the engines' models are in it)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_drift, metadata)
    finally:
        await engine.dispose()


def _drift(connection: Connection, metadata: MetaData) -> list[str]:
    context = MigrationContext.configure(connection, opts=DRIFT_OPTIONS)
    return [
        line for diff in compare_metadata(context, metadata) for line in describe_difference(diff)
    ]


def describe_difference(diff: Any) -> list[str]:
    """Alembic's difference tuples as sentences (a column's changes come as a list)."""
    if isinstance(diff, list):
        return [line for part in diff for line in describe_difference(part)]
    kind: str = diff[0]
    if kind.startswith("modify_"):
        _, _schema, table, column, _existing, in_database, in_models = diff
        what = kind.removeprefix("modify_")
        return [
            f"{table}.{column}: {what} is {in_database!r} in the database, {in_models!r} in the models"
        ]
    thing = diff[-1]
    name = getattr(thing, "name", None) or str(thing)
    table = getattr(getattr(thing, "table", None), "name", None)
    where = f"{table}: " if table and table != name else ""
    action, _, what = kind.partition("_")
    side = (
        "in the models, not in the database"
        if action == "add"
        else "in the database, not in the models"
    )
    return [f"{where}{what} {name} is {side}"]
