"""FN-33's registry covers the schema: every text, JSON or binary column of every table of the
live database (reflected, as the migrations built it) is either declared in the personal-data
registry (found for a person, erased and exported with them) or in the reviewed list of
non-personal columns with its reason. A new table with a column that could hold a contact's data
fails here until someone places it."""

from __future__ import annotations

import pytest
from sqlalchemy import (
    Boolean,
    Date,
    DateTime,
    Float,
    Integer,
    MetaData,
    Numeric,
    Table,
    Time,
    text,
)

from app.engines.funnels.contacts.non_personal import NON_PERSONAL
from app.engines.funnels.contacts.personal_data import REGISTRY, declared
from app.runtime import Runtime

pytestmark = pytest.mark.usefixtures("collector_paused")

_NOT_TEXT = (Integer, Numeric, Float, Boolean, DateTime, Date, Time)


async def _live_tables(runtime: Runtime) -> list[Table]:
    async with runtime.db.read() as session:
        conn = await session.connection()
        meta = MetaData()
        await conn.run_sync(lambda sync: meta.reflect(bind=sync))
    return list(meta.tables.values())


def uncovered(tables: list[Table]) -> list[str]:
    """Columns that could hold personal data (text, JSON, binary, or a type we cannot tell)
    and that neither the registry nor the non-personal list names."""
    personal = declared()
    missing = []
    for table in tables:
        allowed = set(NON_PERSONAL.get(table.name, ((), ""))[0])
        for column in table.columns:
            if isinstance(column.type, _NOT_TEXT):
                continue
            if column.name in personal.get(table.name, set()) | allowed:
                continue
            missing.append(f"{table.name}.{column.name} ({column.type})")
    return missing


async def test_fn33_every_text_json_or_binary_column_is_registered_or_reviewed(
    runtime: Runtime,
) -> None:
    tables = await _live_tables(runtime)
    assert len(tables) > 50
    assert uncovered(tables) == []


async def test_fn33_a_new_table_with_a_personal_column_fails_the_check(runtime: Runtime) -> None:
    """A table added without a thought for erasure is caught, its numbers and times are not."""
    async with runtime.db.write() as uow:
        await uow.session.execute(
            text(
                "CREATE TABLE newsletter_signups (id INTEGER PRIMARY KEY, "
                "signed_at TIMESTAMP, email VARCHAR(320), answers TEXT)"
            )
        )
    try:
        missing = uncovered(await _live_tables(runtime))
    finally:
        async with runtime.db.write() as uow:
            await uow.session.execute(text("DROP TABLE newsletter_signups"))
    assert [m.split(" ")[0] for m in missing] == [
        "newsletter_signups.email",
        "newsletter_signups.answers",
    ]


async def test_fn33_the_registry_and_the_reviewed_list_name_live_columns_once(
    runtime: Runtime,
) -> None:
    """No stale declaration (a renamed column would silently stop being erased) and no column
    both personal and not."""
    live = {t.name: {c.name for c in t.columns} for t in await _live_tables(runtime)}
    for entry in REGISTRY:
        assert entry.table.name in live, entry.section
        assert set(entry.columns) <= live[entry.table.name], entry.section
    for table, (columns, reason) in NON_PERSONAL.items():
        assert table in live, table
        assert set(columns) <= live[table], table
        assert reason
        assert not set(columns) & declared().get(table, set()), table


def test_fn33_erasure_and_export_name_no_table_of_their_own() -> None:
    """The registry is the one home of where personal data lives: the modules that erase and
    export import no table but the contact (whose identity they read) and, for ending runs, the
    run."""
    import ast
    from pathlib import Path

    import app.engines.funnels.contacts as contacts

    allowed = {"erasure.py": {"Contact"}, "deletion.py": {"Run", "RUN_ACTIVE", "RUN_CANCELLED"}}
    for module, names in allowed.items():
        tree = ast.parse((Path(contacts.__path__[0]) / module).read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").endswith(("models", "bulk_models"))
            for alias in node.names
        }
        assert imported <= names, (module, imported - names)
