"""One-statement writes on PostgreSQL: what a write costs the process, beside the driver alone.

    BENCH_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/postgres \\
        .venv/bin/python bench/lone_write.py [--writes 3000] [--rounds 3]

It creates its own database (dropped at the end) with one table of one row, and times the same
statement (``UPDATE … RETURNING``, autocommit: one round trip, committed as it ends) written
``--writes`` times one after the other, three ways, rounds interleaved:

* **write_alone**: :func:`app.db.lone_statement.write_alone`, as the senders' recorders write a
  group of outcomes (a connection kept for such writes, the driver's own statement cache);
* **pool + SQL layer**: a connection checked out of the pool for each write, put in autocommit
  mode, the statement sent through the SQL layer (``exec_driver_sql``) — how ``write_alone``
  wrote before;
* **driver alone**: asyncpg on a connection of its own, ``fetch`` — the floor.

Printed: wall time and process CPU per write, for each, and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
from funnels_deliver import create_database, drop_database
from sqlalchemy.engine import make_url

from app import event_loop
from app.db.column_arrays import ColumnArrays
from app.db.lone_statement import write_alone
from app.db.session import Database
from app.settings import DatabaseSettings

STATEMENT = "UPDATE counter SET n = n + 1 WHERE id = $1 RETURNING n"


async def timed(writes: int, one: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Microseconds of wall time and of process CPU per write."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(writes):
        await one()
    return (
        (time.perf_counter() - wall) / writes * 1e6,
        (time.process_time() - cpu) / writes * 1e6,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = os.environ.get("BENCH_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1/postgres")
    url = await create_database(base)
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    results: dict[str, list[tuple[float, float]]] = {}
    db = Database(DatabaseSettings(url=url, pool_size=4))
    driver = await asyncpg.connect(dsn)
    try:
        await driver.execute("CREATE TABLE counter (id integer PRIMARY KEY, n integer NOT NULL)")
        await driver.execute("INSERT INTO counter VALUES (1, 0)")

        async def alone() -> object:
            return await write_alone(db, lambda: ColumnArrays(STATEMENT, (1,)))

        async def pooled() -> object:
            async with db.write_engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                result = await conn.exec_driver_sql(STATEMENT, (1,))
                return [tuple(row) for row in result.all()]

        async def bare() -> object:
            return await driver.fetch(STATEMENT, 1)

        ways = {"write_alone": alone, "pool + SQL layer": pooled, "driver alone": bare}
        print(f"PostgreSQL, {args.writes:,} one-statement writes one after the other")
        for round_ in range(args.rounds):
            for name, one in ways.items():
                await timed(100, one)  # warm: connections opened, statements prepared
                results.setdefault(name, []).append(await timed(args.writes, one))
            line = ", ".join(
                f"{n} {r[-1][0]:.0f} us ({r[-1][1]:.0f} us CPU)" for n, r in results.items()
            )
            print(f"  round {round_ + 1}: {line}")
    finally:
        await driver.close()
        await db.dispose()
        await drop_database(url)
    for name, figures in results.items():
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        print(f"{name}: {wall:.0f} us a write, {cpu:.0f} us of CPU (medians)")


if __name__ == "__main__":
    # The loop the worker process runs on, so the figures are the deployed ones.
    event_loop.run(main())
