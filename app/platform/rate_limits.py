"""Rate limits per API key and per workspace: token buckets, reads and writes apart.

Each bucket holds up to ``burst`` tokens and gains ``per_second`` of them back continuously. A
request names the buckets it draws on — its caller's (an API key, or a signed-in person) and its
workspace's, for reads or for writes — and takes one token from each, all or none: when any of them
holds less than one token the request is refused and nothing is taken, so a refused request does
not push the next allowed one further away.

:class:`InProcessRateLimiter` keeps the buckets in the process (the embedded default, one process);
:mod:`app.platform.rate_limits_redis` keeps them in Redis so that every ``serve`` process of a
server-mode deployment draws on the same ones. Both answer with a :class:`Verdict`, which carries
what the response headers say (:meth:`Verdict.headers`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.settings_web import RateLimitSettings


@dataclass(frozen=True, slots=True)
class Limit:
    burst: int
    per_second: float

    @property
    def enabled(self) -> bool:
        """0 in either turns the limit off (a burst that never refills is not a rate)."""
        return self.burst > 0 and self.per_second > 0


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket a request draws on: its name (unique per caller or workspace and per kind of
    request) and its limit."""

    name: str
    limit: Limit


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a request may go on, and the state after it of its tightest bucket."""

    allowed: bool
    bucket: Bucket
    """The tightest of the request's buckets: the one its caller has to slow down for."""
    limit: int
    """Its burst."""
    remaining: int
    """Whole tokens left in it."""
    reset_seconds: int
    """Seconds until it is full again."""
    retry_after_seconds: int
    """Refused: seconds until every bucket of the request holds a token again; else 0."""

    def headers(self) -> dict[str, str]:
        """``RateLimit-*`` (draft-ietf-httpapi-ratelimit-headers) and, on a refusal,
        ``Retry-After``."""
        out = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }
        if not self.allowed:
            out["Retry-After"] = str(self.retry_after_seconds)
        return out


def verdict(buckets: Sequence[Bucket], tokens: Sequence[float], allowed: bool) -> Verdict:
    """The verdict once ``tokens`` (each bucket's, after the request took its token or not) are
    known. The tightest bucket is the one with the fewest whole tokens left (the one further from
    full between equals): the one a client has to slow down for."""
    if allowed:
        retry = 0
    else:
        retry = max(
            math.ceil((1 - left) / bucket.limit.per_second)
            for bucket, left in zip(buckets, tokens, strict=True)
            if left < 1
        )
    # How long each bucket needs to be full, rounded up to the next whole second.
    fill = [
        math.ceil(max(0.0, bucket.limit.burst - left) / bucket.limit.per_second)
        for bucket, left in zip(buckets, tokens, strict=True)
    ]
    tightest = min(range(len(buckets)), key=lambda i: (math.floor(tokens[i]), -fill[i]))
    return Verdict(
        allowed=allowed,
        bucket=buckets[tightest],
        limit=buckets[tightest].limit.burst,
        remaining=max(0, math.floor(tokens[tightest])),
        reset_seconds=fill[tightest],
        retry_after_seconds=max(1, retry) if not allowed else 0,
    )


class RateLimiter(Protocol):
    async def take(self, buckets: Sequence[Bucket]) -> Verdict | None:
        """Take one token from each of ``buckets`` (all enabled), or refuse. ``None``: no verdict
        could be reached (the shared store is not answering) and the request goes on unlimited."""
        ...

    async def aclose(self) -> None: ...


MAX_BUCKETS = 100_000
"""Buckets one process keeps (a few hundred bytes each). Past this the least recently used is
forgotten, which gives its caller a full bucket again: only a caller idle while a hundred thousand
others were busy, and the workspace bucket still holds the whole workspace."""


class InProcessRateLimiter:
    """Buckets in this process, on ``monotonic`` (a :class:`~app.clock.Clock`'s). Taking is one
    synchronous step: concurrent requests of one event loop cannot both take the last token."""

    def __init__(self, monotonic: Callable[[], float], *, max_buckets: int = MAX_BUCKETS) -> None:
        self._monotonic = monotonic
        self._max_buckets = max_buckets
        # name -> (tokens, when they were counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    async def take(self, buckets: Sequence[Bucket]) -> Verdict:
        now = self._monotonic()
        tokens = [self._refilled(bucket, now) for bucket in buckets]
        allowed = all(left >= 1 for left in tokens)
        if allowed:
            tokens = [left - 1 for left in tokens]
        for bucket, left in zip(buckets, tokens, strict=True):
            self._buckets[bucket.name] = (left, now)
            self._buckets.move_to_end(bucket.name)
        while len(self._buckets) > self._max_buckets:
            self._buckets.popitem(last=False)
        return verdict(buckets, tokens, allowed)

    def _refilled(self, bucket: Bucket, now: float) -> float:
        state = self._buckets.get(bucket.name)
        if state is None:
            return float(bucket.limit.burst)
        left, then = state
        gained = max(0.0, now - then) * bucket.limit.per_second
        return min(float(bucket.limit.burst), left + gained)

    async def aclose(self) -> None:
        self._buckets.clear()


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    """Which buckets a request draws on, from the settings."""

    key_read: Limit
    key_write: Limit
    workspace_read: Limit
    workspace_write: Limit

    @classmethod
    def from_settings(cls, settings: RateLimitSettings) -> RateLimitPolicy:
        return cls(
            key_read=Limit(settings.key_read_burst, settings.key_read_per_second),
            key_write=Limit(settings.key_write_burst, settings.key_write_per_second),
            workspace_read=Limit(settings.workspace_read_burst, settings.workspace_read_per_second),
            workspace_write=Limit(
                settings.workspace_write_burst, settings.workspace_write_per_second
            ),
        )

    @property
    def enabled(self) -> bool:
        return any(
            limit.enabled
            for limit in (self.key_read, self.key_write, self.workspace_read, self.workspace_write)
        )

    def buckets(self, caller: str, workspace_id: int, *, read: bool) -> list[Bucket]:
        """The enabled buckets of a request by ``caller`` (``key:<id>`` or ``user:<id>``) in
        ``workspace_id``; ``read`` for GET and HEAD."""
        kind = "read" if read else "write"
        key, workspace = (
            (self.key_read, self.workspace_read) if read else (self.key_write, self.workspace_write)
        )
        out = []
        if key.enabled:
            out.append(Bucket(f"{caller}:{kind}", key))
        if workspace.enabled:
            out.append(Bucket(f"workspace:{workspace_id}:{kind}", workspace))
        return out
