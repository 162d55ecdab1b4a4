"""Slowing down password guessing: too many failed sign-ins for one e-mail from one client address
within a window refuse further attempts until the window has passed.

The counts live in the process (a restart forgets them); each ``serve`` replica counts its own.
That bounds guessing to a few attempts per minute per account and address without a table that
every failed attempt would write to.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from datetime import datetime, timedelta

# Enough distinct (e-mail, address) pairs for a busy instance; the oldest are forgotten first.
_MAX_TRACKED = 10_000


class SignInThrottle:
    def __init__(self, *, max_failures: int, window: timedelta) -> None:
        self.max_failures = max_failures
        self.window = window
        self._failures: OrderedDict[tuple[str, str], deque[datetime]] = OrderedDict()

    @staticmethod
    def _key(email: str, address: str) -> tuple[str, str]:
        return (email.strip().lower(), address)

    def _recent(self, key: tuple[str, str], now: datetime) -> deque[datetime]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, email: str, address: str, now: datetime) -> timedelta | None:
        """How long until the next attempt is allowed, or None when it is allowed now."""
        times = self._recent(self._key(email, address), now)
        if len(times) < self.max_failures:
            return None
        return times[0] + self.window - now

    def failed(self, email: str, address: str, now: datetime) -> None:
        key = self._key(email, address)
        times = self._recent(key, now)
        times.append(now)
        self._failures[key] = times
        self._failures.move_to_end(key)
        while len(self._failures) > _MAX_TRACKED:
            self._failures.popitem(last=False)

    def succeeded(self, email: str, address: str) -> None:
        self._failures.pop(self._key(email, address), None)
