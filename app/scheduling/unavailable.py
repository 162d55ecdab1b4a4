"""The job queue's broker (Redis) not answering: the error callers get, and the log of an outage.

:class:`QueueUnavailable` is a 503 (``queue_unavailable``) in the web layer's error format, so a
request that needed the queue answers with something a client can retry instead of a 500.
:class:`Outage` keeps a process's log to one line when the broker stops answering and one when it
answers again, however many calls fail in between (requests, workers, sweeps, readiness probes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.errors import DomainError

log = logging.getLogger(__name__)


class QueueUnavailable(DomainError):
    """The broker could not be reached within its timeout; nothing was queued."""

    status = 503
    code = "queue_unavailable"


class Outage:
    """Whether the broker is known to be down, logged on each change only."""

    def __init__(self, what: str, monotonic: Callable[[], float]) -> None:
        self.what = what
        self._monotonic = monotonic
        self._since: float | None = None

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        if self._since is not None:
            return
        self._since = self._monotonic()
        log.warning(
            "%s is not reachable (%s: %s): what needs it fails or waits until it is back",
            self.what,
            type(exc).__name__,
            exc,
        )

    def answered(self) -> None:
        if self._since is None:
            return
        lasted = self._monotonic() - self._since
        self._since = None
        log.info("%s answers again after %.1f s", self.what, lasted)
