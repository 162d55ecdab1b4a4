"""Slowing down password guessing, per account and per client address.

Every attempt is counted *before* the password is verified, in the same synchronous step as the
check of the limit (nothing awaits between them), so parallel attempts cannot all pass the check
before any of them is recorded: of 50 concurrent wrong sign-ins for one account, only the first
``max_failures`` reach password verification and the rest answer 429 at once. A right password
takes its attempt back and clears the account's count.

Two limits hold: failures for one e-mail address whatever the client (someone guessing one
account from many addresses), and failures from one client address whatever the e-mail (one client
trying many accounts). The counts live in the process (a restart forgets them); each ``serve``
replica counts its own.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from datetime import datetime, timedelta

# Enough distinct accounts and addresses for a busy instance; the oldest are forgotten first.
_MAX_TRACKED = 10_000


class _Window:
    """Attempt times per key within a sliding window, bounded in the number of keys."""

    def __init__(self, limit: int, window: timedelta) -> None:
        self.limit = limit
        self.window = window
        self._times: OrderedDict[str, deque[datetime]] = OrderedDict()

    def _recent(self, key: str, now: datetime) -> deque[datetime]:
        times = self._times.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._times[key]
        return times

    def wait(self, key: str, now: datetime) -> timedelta | None:
        times = self._recent(key, now)
        if len(times) < self.limit:
            return None
        return times[0] + self.window - now

    def count(self, key: str, now: datetime) -> None:
        times = self._recent(key, now)
        times.append(now)
        self._times[key] = times
        self._times.move_to_end(key)
        while len(self._times) > _MAX_TRACKED:
            self._times.popitem(last=False)

    def take_back(self, key: str) -> None:
        times = self._times.get(key)
        if times:
            times.pop()

    def clear(self, key: str) -> None:
        self._times.pop(key, None)


class SignInThrottle:
    def __init__(
        self, *, max_failures: int, window: timedelta, max_failures_per_address: int = 50
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self._accounts = _Window(max_failures, window)
        self._addresses = _Window(max_failures_per_address, window)
        self._reported = _Window(1, window)

    @staticmethod
    def _account(email: str) -> str:
        return email.strip().lower()

    def wait(self, email: str, address: str, now: datetime) -> timedelta | None:
        """How long the next attempt would have to wait, counting nothing (``None``: it may go
        on)."""
        account = self._account(email)
        waits = [
            wait
            for wait in (self._accounts.wait(account, now), self._addresses.wait(address, now))
            if wait is not None
        ]
        return max(waits) if waits else None

    def attempt(self, email: str, address: str, now: datetime) -> timedelta | None:
        """Count an attempt (a password, or a second-factor code) before it is checked. Returns
        how long to wait when the attempt is refused (and then it is not counted), ``None`` when
        it may go on."""
        if (wait := self.wait(email, address, now)) is not None:
            return wait
        account = self._account(email)
        self._accounts.count(account, now)
        self._addresses.count(address, now)
        return None

    def newly_tripped(self, email: str, address: str, now: datetime) -> bool:
        """Whether a refused attempt is the first of its burst (for the audit log, which
        records a burst once per window, not each refused guess)."""
        key = f"{self._account(email)} {address}"
        if self._reported.wait(key, now) is not None:
            return False
        self._reported.count(key, now)
        return True

    def succeeded(self, email: str, address: str) -> None:
        """The attempt had the right password: it was no failure, and the account starts over."""
        self._accounts.clear(self._account(email))
        self._addresses.take_back(address)
