"""The rate limits in the web layer: checked once a request's caller is known, told in headers.

:func:`check_rate_limits` runs in the authentication guard (:mod:`app.web.access`) right after the
API key or session is resolved: a request over its caller's or its workspace's limit answers 429
(``rate_limited``) with ``Retry-After`` before any parameter or body is read. The ``RateLimit-*``
headers go on every answer to an authenticated request, the allowed ones too
(:func:`rate_limit_headers`, a ``before_send`` hook), so a client can slow down before it is
refused. Public routes (webhooks, probes, sign-in) are not limited here.

The buckets are in Redis when the deployment has one (``REDIS_URL``, server mode: every ``serve``
process shares them), else in the process, like the job queue's choice of backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import TooManyRequestsException
from litestar.types import Message, Scope

from app.platform.rate_limits import (
    InProcessRateLimiter,
    RateLimiter,
    RateLimitPolicy,
    Verdict,
)
from app.platform.rate_limits_redis import RedisRateLimiter
from app.platform.service import Principal
from app.runtime import Runtime
from app.web.auth import READ_METHODS, get_runtime

HEADERS_STATE = "rate_limit_headers"
"""Where the check leaves the headers the answer carries (encoded, for the ``before_send`` hook)."""

RESOURCE = "rate_limits"
"""The key of the runtime's :class:`RateLimits` among its resources."""


def build_limiter(runtime: Runtime) -> RateLimiter:
    """Redis when the deployment has one, else this process's buckets."""
    settings = runtime.settings
    if settings.queue.uses_redis:
        return RedisRateLimiter(
            settings.queue.redis_url,
            settings.queue.arq_queue_name,
            timeout=settings.queue.redis_timeout_seconds,
            monotonic=runtime.clock.monotonic,
        )
    return InProcessRateLimiter(runtime.clock.monotonic)


class RateLimits:
    """The runtime's policy and limiter (one per process, closed with its resources)."""

    def __init__(self, runtime: Runtime, limiter: RateLimiter | None = None) -> None:
        self.policy = RateLimitPolicy.from_settings(runtime.settings.rate_limits)
        self._runtime = runtime
        self._limiter = limiter

    @property
    def limiter(self) -> RateLimiter:
        if self._limiter is None:
            self._limiter = build_limiter(self._runtime)
        return self._limiter

    async def aclose(self) -> None:
        if self._limiter is not None:
            await self._limiter.aclose()
            self._limiter = None


def rate_limits(runtime: Runtime) -> RateLimits:
    return runtime.resources.get(RESOURCE, lambda: RateLimits(runtime))


async def check_rate_limits(
    connection: ASGIConnection[Any, Any, Any, Any], principal: Principal
) -> None:
    """Take a token from the caller's and the workspace's buckets, or answer 429."""
    limits = rate_limits(get_runtime(connection))
    if not limits.policy.enabled:
        return
    caller = (
        f"key:{principal.api_key_id}"
        if principal.api_key_id is not None
        else f"user:{principal.user_id}"
    )
    read = connection.scope.get("method") in READ_METHODS
    buckets = limits.policy.buckets(caller, principal.workspace_id, read=read)
    if not buckets:
        return
    result = await limits.limiter.take(buckets)
    if result is None:  # the shared buckets are out of reach: fail open
        return
    headers = result.headers()
    connection.scope.setdefault("state", {})[HEADERS_STATE] = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
    if not result.allowed:
        raise TooManyRequestsException(refusal(result, read=read), headers=headers)


def refusal(result: Verdict, *, read: bool) -> str:
    """The 429's message: whose limit, how large, and when to try again."""
    name = result.bucket.name
    if name.startswith("workspace:"):
        whose = "this workspace"
    elif name.startswith("key:"):
        whose = "this API key"
    else:
        whose = "this account"
    limit = result.bucket.limit
    return (
        f"Too many {'reads' if read else 'writes'} by {whose}: at most {limit.burst} at once, "
        f"then {limit.per_second:g} a second. Retry in {result.retry_after_seconds} s."
    )


def rate_limit_headers() -> Callable[[Message, Scope], Awaitable[None]]:
    """The ``before_send`` hook putting a checked request's ``RateLimit-*`` headers on its answer
    (a 429's too: replaced, not doubled)."""

    async def before_send(message: Message, scope: Scope) -> None:
        if message["type"] != "http.response.start":
            return
        ours: list[tuple[bytes, bytes]] | None = scope.get("state", {}).get(HEADERS_STATE)
        if not ours:
            return
        names = {name for name, _ in ours}
        headers = [h for h in message.get("headers", ()) if h[0].lower() not in names]
        headers.extend(ours)
        message["headers"] = headers

    return before_send
