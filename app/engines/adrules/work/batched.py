"""Many Graph sub-requests sent as batch calls of at most 50, each item's outcome kept apart
(spec §7 "Batch").

Meta answers a batch with one item per sub-request, in order: ``{code, headers, body}`` with the body
as a JSON *string*, an item failing while the others succeed, and ``null`` for items it did not reach
before its timeout. Here an item that is ``null`` or failed transiently is sent again with the other
unfinished ones, after the retry schedule's wait (or Meta's throttling estimate, when longer); a
permanent failure is that item's error only; a whole call that fails transiently is sent again the
same way, and a permanent one is every item's error.

Used for the worker's live re-reads (GETs) and its writes (POSTs). Sending a write again is safe:
every write sets an absolute value (a status, a budget in minor units, a name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.integrations.meta.errors import MetaError, error_from_response
from app.integrations.meta.reader import MAX_BATCH
from app.integrations.meta.retry import RETRY_DELAYS, next_wait
from app.integrations.meta.structs import BatchReply
from app.integrations.meta.usage import parse_usage

K = TypeVar("K")
Sleep = Callable[[float], Awaitable[None]]
Send = Callable[[Sequence[K]], Awaitable[list[BatchReply | None]]]
"""One batch call carrying one sub-request per item, its reply in the same order."""

CONCURRENT_CALLS = 4
"""Batch calls of one job in flight at once."""


@dataclass(frozen=True, slots=True)
class ItemResult(Generic[K]):
    item: K
    body: bytes | None = None
    """The item's reply body (a 2xx), as sent inside the batch's JSON string."""
    error: MetaError | None = None
    refused: str | None = None
    """The call was not made: ``Refused`` was raised before it (the platform stop)."""


class Refused(Exception):
    """Raised by a ``send`` instead of making its call: its items are not sent, with this
    reason, and the other calls go on asking."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class BatchStats:
    calls: int = 0
    items: int = 0
    retried_items: int = 0


def item_error(reply: BatchReply | None) -> MetaError | None:
    """The error of one batch item (``None`` for a 2xx); a ``null`` item is transient."""
    if reply is None:
        return MetaError("the batch timed out before this item", transient=True)
    if reply.code < 400:
        return None
    headers = {h.get("name", "").lower(): h.get("value", "") for h in reply.headers or []}
    regain = parse_usage(headers).regain_access_seconds
    return error_from_response(
        reply.code, (reply.body or "").encode(), retry_after_seconds=regain or None
    )


async def send_in_batches(
    items: Sequence[K],
    send: Send[K],
    *,
    sleep: Sleep,
    retry_delays: tuple[float, ...] = RETRY_DELAYS,
    max_wait_seconds: float = 60.0,
    size: int = MAX_BATCH,
    stats: BatchStats | None = None,
    concurrency: int = CONCURRENT_CALLS,
) -> list[ItemResult[K]]:
    """Send ``items`` in batch calls of ``size`` (≤ 50), ``concurrency`` calls at a time; one
    result per item, in order."""
    if not 1 <= size <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} items")
    counted = stats if stats is not None else BatchStats()
    results: list[ItemResult[K] | None] = [None] * len(items)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def chunk(start: int) -> None:
        async with gate:
            await _rounds(
                list(range(start, min(start + size, len(items)))),
                items,
                results,
                send,
                sleep=sleep,
                retry_delays=retry_delays,
                max_wait_seconds=max_wait_seconds,
                stats=counted,
            )

    await asyncio.gather(*(chunk(start) for start in range(0, len(items), size)))
    return [r for r in results if r is not None]


async def _rounds(
    pending: list[int],
    items: Sequence[K],
    results: list[ItemResult[K] | None],
    send: Send[K],
    *,
    sleep: Sleep,
    retry_delays: tuple[float, ...],
    max_wait_seconds: float,
    stats: BatchStats,
) -> None:
    for round_ in range(len(retry_delays) + 1):
        last_round = round_ == len(retry_delays)
        try:
            replies = await send([items[i] for i in pending])
        except Refused as refusal:
            for i in pending:
                results[i] = ItemResult(items[i], refused=refusal.reason)
            return
        except MetaError as exc:
            stats.calls += 1
            stats.items += len(pending)
            wait = (
                None
                if last_round or not exc.transient
                else next_wait(exc, retry_delays[round_], max_wait_seconds)
            )
            if wait is None:
                for i in pending:
                    results[i] = ItemResult(items[i], error=exc)
                return
            await sleep(wait)
            stats.retried_items += len(pending)
            continue
        stats.calls += 1
        stats.items += len(pending)
        again: list[int] = []
        waits: list[float] = []
        for i, reply in zip(pending, replies, strict=True):
            error = item_error(reply)
            if error is None:
                assert reply is not None
                results[i] = ItemResult(items[i], body=(reply.body or "").encode())
                continue
            wait = (
                next_wait(error, retry_delays[round_], max_wait_seconds) if not last_round else None
            )
            if error.transient and wait is not None:
                again.append(i)
                waits.append(wait)
            else:
                results[i] = ItemResult(items[i], error=error)
        if not again:
            return
        await sleep(max(waits))
        stats.retried_items += len(again)
        pending = again
