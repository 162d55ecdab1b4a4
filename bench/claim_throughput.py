"""The claim primitive's rows/s on PostgreSQL, 1 and 100 rows per statement, beside the raw
asyncpg loops of ``bench/queue_throughput.py`` measured in the same run.

    .venv/bin/python bench/claim_throughput.py [--rows 20000] [--pg URL]

Each loop claims due rows and marks them done, one connection, until the table is drained: the raw
loop with prepared asyncpg statements in autocommit; the primitive with
:meth:`app.scheduling.claim.Claim.take` (one unit of work per claim, through SQLAlchemy) and one
``UPDATE … WHERE id IN (…)`` unit of work per batch for the completions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from queue_throughput import asyncpg_dsn, drop_pg_database, fresh_pg_database, raw_asyncpg
from sqlalchemy import BigInteger, Column, LargeBinary, MetaData, String, Table, text, update

from app.clock import SystemClock
from app.db.session import Database
from app.db.types import UTCDateTime
from app.scheduling.claim import Claim
from app.settings import DatabaseSettings

metadata = MetaData()
items = Table(
    "bench_claim",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("status", String(16), nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("lease_owner", String(100)),
    Column("lease_until", UTCDateTime),
)

CLAIM = Claim(
    table=items,
    due="status = 'queued'",
    order_by="id",
    returning=("id", "payload"),
    owner="lease_owner",
    expires="lease_until",
    sets={"status": "'running'"},
)


async def primitive(url: str, rows: int, batch: int) -> float:
    db = Database(DatabaseSettings(url=url))
    clock = SystemClock()
    try:
        async with db.write_engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)
            await conn.run_sync(metadata.create_all)
            await conn.execute(
                text("CREATE INDEX bench_claim_due ON bench_claim (id) WHERE status = 'queued'")
            )
            await conn.execute(
                text(
                    "INSERT INTO bench_claim (id, status, payload) "
                    "SELECT g, 'queued', '\\x7b7d'::bytea FROM generate_series(1, :n) g"
                ),
                {"n": rows},
            )
            await conn.execute(text("ANALYZE bench_claim"))
        began = time.perf_counter()
        drained = 0
        while claimed := await CLAIM.take(
            db, now=clock.now(), limit=batch, owner="bench", lease_seconds=300
        ):
            async with db.write() as uow:
                await uow.session.execute(
                    update(items)
                    .where(items.c.id.in_([r[0] for r in claimed]))
                    .values(status="done", lease_owner=None, lease_until=None)
                )
            drained += len(claimed)
        elapsed = time.perf_counter() - began
        assert drained == rows, drained
        async with db.write_engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)
        return rows / elapsed
    finally:
        await db.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--pg", default="postgresql+asyncpg://postgres@127.0.0.1/postgres")
    args = parser.parse_args()
    scratch = await fresh_pg_database(args.pg)
    try:
        dsn = asyncpg_dsn(scratch)
        single = max(1, args.rows // 4)  # one row per statement is slow: a quarter of the rows
        figures = [
            ("raw asyncpg, 1 row per statement", await raw_asyncpg(dsn, single, 1)),
            ("claim primitive, 1 row per statement", await primitive(scratch, single, 1)),
            ("raw asyncpg, 100 rows per statement", await raw_asyncpg(dsn, args.rows, 100)),
            ("claim primitive, 100 rows per statement", await primitive(scratch, args.rows, 100)),
        ]
    finally:
        await drop_pg_database(scratch)
    print(f"PostgreSQL, one connection, {args.rows:,} rows ({single:,} for 1 row per statement)")
    for name, rate in figures:
        print(f"  {name:<42} {rate:>9,.0f} rows/s")
    print(
        f"  primitive / raw: {figures[1][1] / figures[0][1]:.2f} at 1 row, "
        f"{figures[3][1] / figures[2][1]:.2f} at 100 rows"
    )


if __name__ == "__main__":
    asyncio.run(main())
