"""Whether the running job may still call outside APIs: revoked once its queue lease is lost.

The queue workers (database queue and arq) give every job they run a :class:`CallPermit`, reachable from anywhere
in the job's task (and the tasks it starts) through a context variable. When the worker's
heartbeat finds that the job's lease was taken by another worker — or that it expired because
renewals kept failing — it revokes the permit and cancels the job. The one outbound HTTP client
factory and the SMTP senders ask :func:`check_outside_call` before each call, so a job that lost
its lease makes no further outside call, whatever the engine and even where it catches the
cancellation: a provider post or a Graph write is then the new run's to make, once.

Code that runs outside a queue job (requests, sweeps, tests calling an engine directly) has no
permit, and the check passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from app.scheduling.claim import LeaseLost


class CallPermit:
    """One job attempt's permission to call outside; revoked once and for good."""

    __slots__ = ("reason",)

    def __init__(self) -> None:
        self.reason: str | None = None
        """Why the permit was revoked (``None`` while it holds)."""

    @property
    def revoked(self) -> bool:
        return self.reason is not None

    def revoke(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


_current: ContextVar[CallPermit | None] = ContextVar("sweepline_call_permit", default=None)


@contextmanager
def calls_permitted_by(permit: CallPermit) -> Iterator[CallPermit]:
    """Run the block (a job's handler) under ``permit``."""
    token = _current.set(permit)
    try:
        yield permit
    finally:
        _current.reset(token)


def permit_calls(permit: CallPermit) -> None:
    """Put the rest of the current context under ``permit``: for a context made for one job
    attempt (its task's), which ends with it."""
    _current.set(permit)


def current_permit() -> CallPermit | None:
    return _current.get()


def check_outside_call() -> None:
    """Raise :class:`~app.scheduling.claim.LeaseLost` when the running job's permit was revoked.

    Called before every outside call (HTTP request, SMTP message)."""
    permit = _current.get()
    if permit is not None and permit.reason is not None:
        raise LeaseLost(permit.reason)
