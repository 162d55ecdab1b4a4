"""The job queue's broker (Redis) not answering: the error callers get, and the log of an outage.

:class:`QueueUnavailable` is a 503 (``queue_unavailable``) in the web layer's error format, so a
request that needed the queue answers with something a client can retry instead of a 500.
:class:`Outage` keeps a process's log to one line when the broker stops answering and one when it
answers again, however many calls fail in between (requests, workers, sweeps, readiness probes),
and lets one call a second try the broker while it is down (the others fail at once).
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


RETRY_WHILE_DOWN_SECONDS = 1.0
"""During an outage, one call a second tries the broker and the others fail at once: against a
broker that accepts connections and never answers each try waits out the whole timeout, and a
burst of requests would all wait it out (holding their transactions open meanwhile)."""


class Outage:
    """Whether the broker is known to be down, logged on each change only."""

    def __init__(self, what: str, monotonic: Callable[[], float]) -> None:
        self.what = what
        self._monotonic = monotonic
        self._since: float | None = None
        self._tried_at = 0.0

    @property
    def down(self) -> bool:
        return self._since is not None

    def may_try(self) -> bool:
        """Whether a call should try the broker now: always while it answers; during an outage
        once per :data:`RETRY_WHILE_DOWN_SECONDS` (this call, if it is the first since)."""
        now = self._monotonic()
        if self._since is not None and now - self._tried_at < RETRY_WHILE_DOWN_SECONDS:
            return False
        self._tried_at = now
        return True

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
