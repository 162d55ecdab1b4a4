"""Group commit for inbound events: many concurrent requests, one insert and one commit.

A request that stores an event hands it to the :class:`EventWriter` and awaits its outcome. The
writer gathers the events that arrive within a short window (``window_seconds``, or at once when
``max_rows`` are waiting) and writes them with one multi-row ``INSERT … ON CONFLICT DO NOTHING
RETURNING``: one statement in autocommit mode, atomic on its own and committed as it ends, handed
straight to the driver on a connection the writer keeps (on PostgreSQL the rows travel as one array
per column, one round trip; on SQLite it is one call into the driver's thread). Each request is
answered only after that commit, so an answered event is durable; a commit costs ~0.4 ms on
PostgreSQL, and sharing it is what lets the endpoints keep up with a webhook burst.

At most ``max_batches`` batches are written at a time (one on SQLite, whose single write lock
would only make more wait on its busy timeout, backing off for up to 100 ms a try). Events that
arrive while every batch slot is busy wait for the next free one and go together, up to
``max_rows``, as soon as it frees: under load a batch grows to what arrived during one write
instead of more writes competing, so the wait stays about two writes long.

The sender's event id stays the deduplication key: a repeat within the batch is folded into its
first occurrence before the insert (answered "not stored", like a repeat of an earlier batch, which
the unique index skips). When the batch statement fails, its events are written again one by one,
each in its own transaction, so one bad event fails only its own request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.db.dialect import insert_ignoring
from app.engines.funnels.events.ingest import store
from app.engines.funnels.events.models import InboundEvent

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.db.session import Database

log = logging.getLogger(__name__)

Key = tuple[int, str, str]
"""The deduplication key of an event with a sender id: (workspace, source, sender's id)."""


@dataclass(slots=True)
class _Pending:
    workspace_id: int
    source: str
    name: str
    external_id: str | None
    payload: Mapping[str, Any]
    now: datetime
    answer: asyncio.Future[int | None] = field(repr=False)

    @property
    def key(self) -> Key | None:
        if self.external_id is None:
            return None
        return (self.workspace_id, self.source, self.external_id)

    def row(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "source": self.source,
            "name": self.name,
            "external_id": self.external_id,
            "payload": self.payload,
            "received_at": self.now,
        }


# PostgreSQL: one row per array position; ON CONFLICT skips a sender id stored before (the
# unique index ux_funnel_inbound_events_sender_id), so it returns no row for it.
_INSERT_UNNEST = (
    "INSERT INTO funnel_inbound_events "
    "(workspace_id, source, name, external_id, payload, received_at) "
    "SELECT * FROM unnest($1::bigint[], $2::varchar[], $3::varchar[], $4::varchar[], "
    "$5::jsonb[], $6::timestamptz[]) "
    "ON CONFLICT DO NOTHING RETURNING id, workspace_id, source, external_id"
)


# SQLite: the same statement with the rows as a multi-row VALUES (the text differs by row count;
# the driver caches each); SQLite checks the unique index itself.
_INSERT_SQLITE = (
    "INSERT INTO funnel_inbound_events "
    "(workspace_id, source, name, external_id, payload, received_at) VALUES {rows} "
    "ON CONFLICT DO NOTHING RETURNING id, workspace_id, source, external_id"
)


def _sqlite_time(value: datetime) -> str:
    """What ``UTCDateTime`` stores on SQLite: naive UTC in SQLAlchemy's storage format, so the
    rows sort and compare as text like every other row's."""
    v = _utc(value)
    return (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d} "
        f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}"
    )


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetime given to a UTC column")
    return value.astimezone(UTC)


_JSON = msgspec.json.Encoder()


def _json_text(payload: Mapping[str, Any]) -> str:
    """The payload as JSON text, what the column stores. msgspec writes it about ten times faster
    than the column type's ``json.dumps``; the text is compact and keeps non-ASCII characters as
    they are, and reads back as the same document."""
    return _JSON.encode(payload).decode()


def _settle(answer: asyncio.Future[int | None], value: int | None) -> None:
    if not answer.done():  # a request that went away no longer waits for it
        answer.set_result(value)


def _fail(answer: asyncio.Future[int | None], error: BaseException) -> None:
    if not answer.done():
        answer.set_exception(error)


class EventWriter:
    """Stores inbound events in groups; :meth:`store` returns after the event's commit."""

    def __init__(
        self, db: Database, *, window_seconds: float, max_rows: int, max_batches: int = 1
    ) -> None:
        if window_seconds < 0 or max_rows < 1 or max_batches < 1:
            raise ValueError(
                "the window cannot be negative; a batch holds at least one row, and at least "
                "one batch is written at a time"
            )
        self.db = db
        self.window_seconds = window_seconds
        self.max_rows = max_rows
        self.max_batches = max_batches
        self.batches = 0
        """Batches written (each one transaction)."""
        self._pending: list[_Pending] = []
        self._timer: asyncio.TimerHandle | None = None
        self._writing: set[asyncio.Task[None]] = set()
        self._idle: list[tuple[AsyncConnection, Any]] = []
        """Connections (and their driver's connections) kept between two batches."""

    async def store(
        self,
        *,
        workspace_id: int,
        source: str,
        name: str,
        external_id: str | None,
        payload: Mapping[str, Any],
        now: datetime,
    ) -> int | None:
        """The stored event's id, or ``None`` when the sender's id was seen before (in this
        batch or an earlier one). Raises what writing this one event raised."""
        if self.window_seconds == 0:
            async with self.db.write() as uow:
                return await store(
                    uow.session,
                    workspace_id=workspace_id,
                    source=source,
                    name=name,
                    external_id=external_id,
                    payload=payload,
                    now=now,
                )
        loop = asyncio.get_running_loop()
        pending = _Pending(
            workspace_id, source, name, external_id, payload, now, loop.create_future()
        )
        self._pending.append(pending)
        if len(self._writing) < self.max_batches:
            if len(self._pending) >= self.max_rows:
                self._start_batch()
            elif self._timer is None:
                self._timer = loop.call_later(self.window_seconds, self._window_passed)
        # Else a batch being written starts the next one when it ends.
        # A request cancelled while it waits cancels only its own answer: the batch is a task
        # of its own, and it settles only the answers still awaited.
        return await pending.answer

    def _window_passed(self) -> None:
        self._timer = None
        if len(self._writing) < self.max_batches:
            self._start_batch()

    def _start_batch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch = self._pending[: self.max_rows]
        del self._pending[: self.max_rows]
        if not batch:
            return
        task = asyncio.get_running_loop().create_task(self._write(batch), name="ingest-batch")
        self._writing.add(task)
        task.add_done_callback(self._batch_written)

    def _batch_written(self, task: asyncio.Task[None]) -> None:
        self._writing.discard(task)
        # What arrived meanwhile has waited for this write already: it goes now, not after
        # another window.
        while self._pending and len(self._writing) < self.max_batches:
            self._start_batch()

    async def _write(self, batch: list[_Pending]) -> None:
        firsts: dict[Key, _Pending] = {}
        rows: list[_Pending] = []
        repeats: list[_Pending] = []
        for pending in batch:
            key = pending.key
            if key is None:
                rows.append(pending)
            elif key in firsts:
                repeats.append(pending)
            else:
                firsts[key] = pending
                rows.append(pending)
        failed: set[Key | None] = set()
        try:
            ids = await self._insert(rows)
        except Exception:
            log.warning("a batch of %d events failed; writing them one by one", len(rows))
            failed = {p.key for p in await self._one_by_one(rows)}
        else:
            self.batches += 1
            for pending, event_id in zip(rows, ids, strict=True):
                _settle(pending.answer, event_id)
        for pending in repeats:
            if pending.key in failed:
                await self._one_by_one([pending])  # its first occurrence failed: try it alone
            else:
                _settle(pending.answer, None)

    async def _insert(self, rows: list[_Pending]) -> list[int | None]:
        """One statement and one commit for all ``rows``; each row's new id or ``None``."""
        keyed = [p for p in rows if p.key is not None]
        unkeyed = [p for p in rows if p.key is None]
        if not unkeyed:
            write = self._insert_postgres if self.db.is_postgres else self._insert_sqlite
            stored = await write(keyed)
            return [stored.get(key) for p in rows if (key := p.key) is not None]
        table = InboundEvent.__table__
        async with self.db.write() as uow:
            found: dict[Key, int] = {}
            if keyed:
                statement = insert_ignoring(uow.session, table).returning(
                    table.c.id, table.c.workspace_id, table.c.source, table.c.external_id
                )
                # Rows as parameters (executemany): the statement is compiled once and cached;
                # a multi-row .values() would be compiled anew for every batch.
                rows_in = [p.row() for p in keyed]
                for row in (await uow.session.execute(statement, rows_in)).all():
                    found[(row[1], row[2], row[3])] = int(row[0])
            # Without a sender id there is nothing to match a returned row to: one statement
            # each, still inside the shared transaction (no endpoint sends these today).
            loose: list[int | None] = []
            for p in unkeyed:
                loose.append(
                    await store(
                        uow.session,
                        workspace_id=p.workspace_id,
                        source=p.source,
                        name=p.name,
                        external_id=None,
                        payload=p.payload,
                        now=p.now,
                    )
                )
        ids = iter(loose)
        return [found.get(p.key) if p.key is not None else next(ids) for p in rows]

    async def _insert_postgres(self, rows: list[_Pending]) -> dict[Key, int]:
        """The batch as one statement in autocommit mode: it is atomic on its own, and its
        commit is part of its one round trip (a transaction would add BEGIN and COMMIT, two more
        waits under load). The rows travel as one array per column, so the statement's text is
        the same for every batch size and is prepared once per connection."""
        columns = (
            [p.workspace_id for p in rows],
            [p.source for p in rows],
            [p.name for p in rows],
            [p.external_id for p in rows],
            [_json_text(p.payload) for p in rows],
            [_utc(p.now) for p in rows],
        )
        # The writer keeps its connections between batches (a checkout from the pool costs a
        # pre-ping round trip) and hands the statement straight to the driver, whose statement
        # cache prepares it once per connection: the SQL layer's parameter and row handling cost
        # more per batch than the rest of the batch's Python. A connection whose statement
        # failed goes back to the pool (which drops it if it is dead); the batch is then written
        # row by row.
        conn, driver = self._idle.pop() if self._idle else await self._connect()
        try:
            records = await driver.fetch(_INSERT_UNNEST, *columns)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._idle.append((conn, driver))
        return {(r[1], r[2], r[3]): int(r[0]) for r in records}

    async def _insert_sqlite(self, rows: list[_Pending]) -> dict[Key, int]:
        """The batch as one statement in SQLite's autocommit mode (the driver's connections are
        opened with ``isolation_level=None``): it waits its turn in the process's write line as a
        transaction does, takes the write lock and commits when it ends, one call into the
        driver's thread instead of BEGIN IMMEDIATE, INSERT and COMMIT. The values are bound as
        the column types would bind them: JSON text, UTC times in SQLAlchemy's SQLite storage
        format."""
        values: list[Any] = []
        for p in rows:
            values += (p.workspace_id, p.source, p.name, p.external_id)
            values += (_json_text(p.payload), _sqlite_time(p.now))
        sql = _INSERT_SQLITE.format(rows=", ".join(["(?, ?, ?, ?, ?, ?)"] * len(rows)))
        conn, driver = self._idle.pop() if self._idle else await self._connect()
        gate = self.db.write_gate
        try:
            # In line with the process's write transactions (app/db/write_gate.py): outside
            # it, the statement would meet their lock in SQLite's busy handler, which looks
            # again only every 100 ms after a while and loses to every writer in line.
            async with gate.turn(driver) if gate is not None else contextlib.nullcontext():
                records = await driver.execute_fetchall(sql, values)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._idle.append((conn, driver))
        return {(r[1], r[2], r[3]): int(r[0]) for r in records}

    async def _connect(self) -> tuple[AsyncConnection, Any]:
        conn = await self.db.write_engine.connect()
        if self.db.is_postgres:
            # Outside a transaction the driver commits each statement (autocommit). SQLite's
            # driver connections already are (app.db.engine); asking SQLAlchemy for it there
            # would reset them to implicit transactions when they go back to the pool.
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        return conn, driver

    async def _one_by_one(self, rows: list[_Pending]) -> list[_Pending]:
        """Each row in a transaction of its own; returns the rows that failed."""
        failed: list[_Pending] = []
        for pending in rows:
            try:
                async with self.db.write() as uow:
                    event_id = await store(
                        uow.session,
                        workspace_id=pending.workspace_id,
                        source=pending.source,
                        name=pending.name,
                        external_id=pending.external_id,
                        payload=pending.payload,
                        now=pending.now,
                    )
            except Exception as exc:
                failed.append(pending)
                _fail(pending.answer, exc)
            else:
                _settle(pending.answer, event_id)
        return failed

    async def aclose(self) -> None:
        """Write what is waiting, wait for the batches being written, close the connections."""
        while self._pending or self._writing:
            if self._pending and len(self._writing) < self.max_batches:
                self._start_batch()
            await asyncio.gather(*self._writing, return_exceptions=True)
        idle, self._idle = self._idle, []
        for conn, _driver in idle:
            with contextlib.suppress(Exception):
                await conn.close()
