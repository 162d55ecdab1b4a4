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
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.db.column_arrays import json_text
from app.db.dialect import insert_ignoring
from app.db.driver_insert import TIMESTAMPTZ, Column, DriverInsert
from app.engines.funnels.events.ingest import store
from app.engines.funnels.events.models import InboundEvent

if TYPE_CHECKING:
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


_COLUMNS = (
    Column("workspace_id", "bigint"),
    Column("source", "varchar"),
    Column("name", "varchar"),
    Column("external_id", "varchar"),
    Column("payload", "jsonb"),
    Column("received_at", TIMESTAMPTZ),
)
_RETURNING = ("id", "workspace_id", "source", "external_id")


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
        # ON CONFLICT skips a sender id stored before (the unique index
        # ux_funnel_inbound_events_sender_id), so no row comes back for it.
        self._rows = DriverInsert(db, "funnel_inbound_events", _COLUMNS, _RETURNING)

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
            stored = await self._insert_keyed(keyed)
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

    async def _insert_keyed(self, rows: list[_Pending]) -> dict[Key, int]:
        """The batch as one autocommitted statement handed to the driver (app/db/driver_insert.py:
        one round trip on PostgreSQL, one call into the driver's thread on SQLite)."""
        stored = await self._rows.insert(
            [
                (p.workspace_id, p.source, p.name, p.external_id, json_text(p.payload), p.now)
                for p in rows
            ]
        )
        return {(r[1], r[2], r[3]): int(r[0]) for r in stored}

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
        await self._rows.aclose()
