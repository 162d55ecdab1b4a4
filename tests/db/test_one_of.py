"""``one_of`` (app/db/dialect.py): a key among many, as one array parameter on PostgreSQL (one
statement text whatever the number of keys) and as ``IN`` on SQLite, with the same rows."""

from __future__ import annotations

from sqlalchemy import BigInteger, cast, literal, select, union_all

from app.db.dialect import one_of
from app.db.session import Database

NUMBERS = union_all(
    *(select(cast(literal(n), BigInteger).label("n")) for n in range(1, 8))
).subquery()


async def test_the_rows_whose_key_is_among_the_keys(shared_db: Database) -> None:
    async with shared_db.read() as session:
        for keys in ([2, 4, 9], [7], [], range(1, 100)):
            stmt = select(NUMBERS.c.n).where(one_of(session, NUMBERS.c.n, keys)).order_by("n")
            got = list(await session.scalars(stmt))
            assert got == sorted(set(keys) & set(range(1, 8))), keys


async def test_on_postgresql_one_statement_text_for_any_number_of_keys(
    shared_db: Database,
) -> None:
    async with shared_db.read() as session:
        dialect = session.get_bind().dialect

        def spelled(keys: list[int]) -> str:
            stmt = select(NUMBERS.c.n).where(one_of(session, NUMBERS.c.n, keys))
            return str(stmt.compile(dialect=dialect))

        if shared_db.is_postgres:
            assert "ANY" in spelled([1])
            assert spelled([1]) == spelled(list(range(500)))
        else:
            assert " IN " in spelled([1])
