"""The rate limits' buckets in Redis (server mode), shared by every process of a deployment.

One Lua script refills, checks and takes the tokens of all of a request's buckets in one step on
the server, so concurrent requests in any number of processes cannot both take a bucket's last
token, and its time is Redis's own (``TIME``), so processes whose clocks disagree still agree on
the buckets. Each bucket is a hash (tokens, when counted) that expires once it would be full again:
an idle caller costs Redis nothing.

Redis not answering (or answering with an error) must not take the API down with it: the request
goes on unlimited (fail open). The outage is logged once when it starts and once when it ends, and
while it lasts one request a second tries Redis and the others do not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import redis.exceptions
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.platform.rate_limits import Bucket, Verdict, verdict
from app.scheduling.unavailable import Outage

# KEYS: the buckets; ARGV: burst and tokens per second of each, in turn.
# Returns 1 or 0 (allowed), then each bucket's tokens after the request, as strings (a Lua number
# returned to Redis would be cut to an integer).
TAKE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local tokens = {}
local allowed = 1
for i, key in ipairs(KEYS) do
  local burst = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local left = tonumber(state[1])
  local at = tonumber(state[2])
  if left == nil or at == nil then
    left = burst
  else
    local elapsed = math.max(0, now - at)
    left = math.min(burst, left + elapsed * rate / 1000000)
  end
  tokens[i] = left
  if left < 1 then
    allowed = 0
  end
end
local out = {allowed}
for i, key in ipairs(KEYS) do
  local burst = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  if allowed == 1 then
    tokens[i] = tokens[i] - 1
  end
  redis.call('HSET', key, 'tokens', tostring(tokens[i]), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil((burst - tokens[i]) / rate * 1000) + 1000)
  out[i + 1] = tostring(tokens[i])
end
return out
"""

FAILURES = (redis.exceptions.RedisError, OSError)
"""Redis not answering, or answering with an error: either way no verdict, and the request goes on."""


class RedisRateLimiter:
    """Buckets under ``<namespace>:rate:`` on the Redis at ``url``; each command is tried once,
    for at most ``timeout`` seconds."""

    def __init__(
        self, url: str, namespace: str, *, timeout: float, monotonic: Callable[[], float]
    ) -> None:
        self.prefix = f"{namespace}:rate:"
        self.client: Redis = Redis.from_url(
            url,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._take = self.client.register_script(TAKE)
        self.outage = Outage("Redis (the API's rate limits, not applied meanwhile)", monotonic)

    async def take(self, buckets: Sequence[Bucket]) -> Verdict | None:
        if not self.outage.may_try():
            return None
        args: list[float] = []
        for bucket in buckets:
            args += [bucket.limit.burst, bucket.limit.per_second]
        try:
            answer = await self._take(keys=[self.prefix + b.name for b in buckets], args=args)
        except FAILURES as exc:
            self.outage.failed(exc)
            return None
        self.outage.answered()
        allowed, *tokens = answer
        return verdict(buckets, [float(left) for left in tokens], bool(int(allowed)))

    async def aclose(self) -> None:
        await self.client.aclose()
