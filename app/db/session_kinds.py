"""How long a database session may wait for a lock, or stay idle inside a transaction, by what the
session is for.

Four kinds of session use the database: a request (someone waits for the answer), a job (a queue
worker runs it), a sweep tick, and a claim (the queue's lease renewals and recovery). Without
bounds, one holder that stalls inside a transaction — a process frozen by the machine, stopped in
a debugger, starved of CPU — makes every session that needs one of its rows wait for as long as it
stalls: a sweep tick, the recovery of its expired jobs, the next attempt of its bulk job.

So, on PostgreSQL:

- ``lock_timeout``: a request or a job waits ``DATABASE_LOCK_TIMEOUT_MS`` for a row lock, a sweep
  tick or a claim ``DATABASE_CLAIM_LOCK_TIMEOUT_MS`` (shorter: the next tick or the worker's next
  round tries again, and meanwhile the loop goes on with its other work). The error is a lock
  timeout (:func:`app.db.locks.is_lock_timeout`): retried, never counted as a failure of the work.
- ``idle_in_transaction_session_timeout`` (``DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS``, every kind):
  PostgreSQL ends the session of a holder that sits inside a transaction without sending anything
  for this long, which rolls it back and frees its locks; an expired lease it held is then taken
  over.
- ``statement_timeout`` is not set: a bulk chunk or a chunked purge is one long statement by
  design, and a statement that waits is already bounded by ``lock_timeout``.

The values of requests and jobs are the connection's own (``server_settings``, no round trip); a
sweep's or a claim's transaction sets its own with one ``set_config(…, true)`` (``SET LOCAL``) at
its start. On SQLite, whose one lock is the file's write lock, a sweep's or claim's write
transaction waits ``SQLITE_CLAIM_BUSY_TIMEOUT_MS`` for it instead of ``SQLITE_BUSY_TIMEOUT_MS``.

The kind travels in a context variable: the queue workers set ``job`` for each job's task, the
sweeper ``sweep`` for its ticks, the workers' lease upkeep ``claim``; everything else is a
``request``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from app.settings import DatabaseSettings

SessionKind = Literal["request", "job", "sweep", "claim"]
REQUEST: SessionKind = "request"
JOB: SessionKind = "job"
SWEEP: SessionKind = "sweep"
CLAIM: SessionKind = "claim"

_kind: ContextVar[SessionKind] = ContextVar("sweepline_session_kind", default=REQUEST)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """One kind's bounds, in milliseconds (0: none)."""

    lock_ms: int
    idle_in_transaction_ms: int
    sqlite_busy_ms: int


def current_kind() -> SessionKind:
    return _kind.get()


def set_session_kind(kind: SessionKind) -> None:
    """Make the rest of the current context (a task's own, and the tasks it starts) ``kind``."""
    _kind.set(kind)


@contextmanager
def session_kind(kind: SessionKind) -> Iterator[None]:
    """Sessions opened inside the block are ``kind``."""
    token = _kind.set(kind)
    try:
        yield
    finally:
        _kind.reset(token)


def timeouts(settings: DatabaseSettings, kind: SessionKind) -> Timeouts:
    claim = kind in (SWEEP, CLAIM)
    return Timeouts(
        lock_ms=settings.claim_lock_timeout_ms if claim else settings.lock_timeout_ms,
        idle_in_transaction_ms=settings.idle_in_transaction_timeout_ms,
        sqlite_busy_ms=settings.claim_busy_timeout_ms if claim else settings.busy_timeout_ms,
    )


def server_settings(settings: DatabaseSettings) -> dict[str, str]:
    """A PostgreSQL connection's own values: a request's (and a job's)."""
    own = timeouts(settings, REQUEST)
    return {
        "lock_timeout": f"{own.lock_ms}ms",
        "idle_in_transaction_session_timeout": f"{own.idle_in_transaction_ms}ms",
    }


def transaction_settings(settings: DatabaseSettings, kind: SessionKind) -> str | None:
    """The statement that gives a transaction of ``kind`` its own values on PostgreSQL, or
    ``None`` when the connection's are the kind's."""
    own = timeouts(settings, kind)
    if own == timeouts(settings, REQUEST):
        return None
    return (
        f"SELECT set_config('lock_timeout', '{own.lock_ms}ms', true), "
        "set_config('idle_in_transaction_session_timeout', "
        f"'{own.idle_in_transaction_ms}ms', true)"
    )
