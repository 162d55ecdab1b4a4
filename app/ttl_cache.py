"""An in-process cache whose entries expire a fixed time after they were put, measured on the
process's clock: for lookups worth reusing for a while (a resolved ingest token, a decrypted
secret) that must still see a change without a restart. On a ``ManualClock`` a test decides
when an entry expires."""

from __future__ import annotations

from typing import Generic, TypeVar

from app.clock import Clock

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self._entries: dict[K, tuple[V, float]] = {}

    def get(self, key: K) -> V | None:
        """The value put under ``key`` less than :attr:`seconds` ago, else ``None``."""
        hit = self._entries.get(key)
        if hit is None:
            return None
        value, expires = hit
        if expires > self.clock.monotonic():
            return value
        del self._entries[key]
        return None

    def put(self, key: K, value: V) -> None:
        self._entries[key] = (value, self.clock.monotonic() + self.seconds)
