"""Pacing every provider call under the account's general rate limit (RT-51).

DataForSEO allows an account a fixed number of API calls a minute across all its endpoints
(2,000 in its help centre's "Rate Limits and Request Limits" page,
<https://dataforseo.com/help-center/rate-limits-and-request-limits>; ``RT_PROVIDER_CALLS_PER_MINUTE``).
A call beyond it is answered ``40202`` and has to be sent again later, so bursts (16 concurrent
``task_get`` per poll tick, 100-task posts, every worker process at once) cost retries and time.

A token bucket gives each call a slot before it is sent. Its size and refill are chosen so that
no 60-second window can hold more than the limit, which is how the provider counts: a bucket of
``capacity`` tokens refilled at ``(limit - capacity) / 60`` a second lets at most
``capacity + (limit - capacity)`` calls through in any 60 s. A call that finds no token *reserves*
the next one (the count goes negative) and waits for its slot, so waiting callers are served in
order without polling the bucket again.

- :class:`LocalTokenBucket` paces one process (the embedded default: one process calls the
  provider);
- :class:`RedisTokenBucket` shares one bucket between every process of a server-mode
  installation: one Lua script reads Redis ``TIME`` and takes the slot atomically, so the
  processes' own clocks do not matter. When Redis cannot be reached the process paces itself
  with a local bucket rather than stop calling the provider.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from redis.asyncio import Redis

from app.clock import Clock

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

REDIS_KEY = "sweepline:ranktracking:provider-calls"


class Pacer(Protocol):
    async def acquire(self) -> None:
        """Wait until one more provider call may be sent."""
        ...


class Unpaced:
    """No pacing (a limit of 0)."""

    async def acquire(self) -> None:
        return None


def bucket_shape(calls_per_minute: int) -> tuple[float, float]:
    """(capacity, refill per second) of a bucket that never lets more than ``calls_per_minute``
    calls into any 60-second window: one second's worth of burst, the rest spread evenly, and 1%
    kept back for calls that reach the provider a little later than their slot (the provider
    counts a call when it arrives; late arrivals bunch up)."""
    if calls_per_minute < 1:
        raise ValueError("calls_per_minute must be at least 1")
    budget = calls_per_minute - calls_per_minute // 100
    capacity = float(max(1, budget // 60))
    rate = (budget - capacity) / 60.0
    if rate <= 0:  # a limit below 2 a minute: one call, then one a minute
        return 1.0, 1.0 / 60.0
    return capacity, rate


class LocalTokenBucket:
    """A token bucket of one process, on ``clock`` (a test or benchmark passes a manual clock and a
    ``sleep`` that moves it)."""

    def __init__(self, calls_per_minute: int, clock: Clock, sleep: Sleep | None = None) -> None:
        self.capacity, self.rate = bucket_shape(calls_per_minute)
        self._clock = clock
        self._sleep = sleep or clock.sleep
        self._tokens = self.capacity
        self._at = clock.monotonic()
        self._lock = asyncio.Lock()

    def _reserve(self) -> float:
        """Take a token (possibly one not yet refilled); the seconds to wait before using it."""
        now = self._clock.monotonic()
        self._tokens = min(self.capacity, self._tokens + max(0.0, now - self._at) * self.rate)
        self._at = max(self._at, now)
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        # The wait happens under the lock: callers leave in the order of their slots, so a call
        # is sent at its slot, never after a later one.
        async with self._lock:
            wait = self._reserve()
            if wait > 0:
                await self._sleep(wait)


# KEYS[1] the bucket; ARGV: capacity, refill per second. Returns the wait in seconds (a string:
# Lua numbers come back truncated to integers otherwise). Redis TIME is the one clock of every
# process; the key expires once the bucket would be full again.
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = capacity
  at = now
end
if now > at then
  tokens = math.min(capacity, tokens + (now - at) * rate)
  at = now
end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
local refill = (capacity - tokens) / rate
redis.call('PEXPIRE', KEYS[1], math.ceil(refill * 1000) + 1000)
if tokens >= 0 then
  return '0'
end
return tostring(-tokens / rate)
"""


class RedisTokenBucket:
    """One bucket shared by every process through Redis (server mode)."""

    def __init__(
        self,
        redis_url: str,
        calls_per_minute: int,
        clock: Clock,
        *,
        key: str = REDIS_KEY,
        timeout_seconds: float = 2.0,
        sleep: Sleep | None = None,
    ) -> None:
        self.capacity, self.rate = bucket_shape(calls_per_minute)
        self._url = redis_url
        self._key = key
        self._timeout = timeout_seconds
        self._sleep = sleep or clock.sleep
        self._fallback = LocalTokenBucket(calls_per_minute, clock, sleep)
        self._redis: Any = None
        self._script: Any = None

    def _client(self) -> Any:
        if self._redis is None:
            self._redis = Redis.from_url(
                self._url,
                socket_timeout=self._timeout,
                socket_connect_timeout=self._timeout,
            )
            self._script = self._redis.register_script(_TAKE)
        return self._script

    async def acquire(self) -> None:
        try:
            script = self._client()
            raw = await script(keys=[self._key], args=[self.capacity, self.rate])
            wait = float(raw.decode() if isinstance(raw, bytes) else raw)
        except Exception as exc:  # any Redis failure: pace locally, never stop the provider calls
            log.warning("provider call pacing: Redis error (%s); pacing locally", exc)
            await self._fallback.acquire()
            return
        if wait > 0:
            await self._sleep(wait)

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None


def provider_pacer(
    calls_per_minute: int, clock: Clock, *, redis_url: str = "", timeout_seconds: float = 2.0
) -> Pacer:
    """The pacer of this installation: shared through Redis in server mode, else in-process;
    unpaced when the limit is 0."""
    if calls_per_minute <= 0:
        return Unpaced()
    if redis_url:
        return RedisTokenBucket(redis_url, calls_per_minute, clock, timeout_seconds=timeout_seconds)
    return LocalTokenBucket(calls_per_minute, clock)
