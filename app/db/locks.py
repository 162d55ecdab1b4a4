"""Recognising a database that is busy rather than broken.

SQLite answers ``database is locked`` when a writer waited ``busy_timeout`` for the write lock;
PostgreSQL answers a lock timeout, a deadlock or a serialisation failure. All of them mean "try
again in a moment": the web layer answers 503 with ``Retry-After`` and background work retries the
same unit of work, instead of either of them counting it as a failure.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")
_PG_RETRYABLE = {
    "55P03",  # lock_not_available (lock_timeout, NOWAIT)
    "40P01",  # deadlock_detected
    "40001",  # serialization_failure
}


def is_lock_timeout(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) says the database was busy, not that the work is
    wrong: the same statement can succeed a moment later."""
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            return False
        if isinstance(current, DBAPIError):
            return is_lock_timeout(current.orig) if current.orig is not None else False
        code = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(code, str) and code in _PG_RETRYABLE:
            return True
        text = str(current).lower()
        if any(marker in text for marker in _SQLITE_BUSY):
            return True
        current = current.__cause__
    return False
