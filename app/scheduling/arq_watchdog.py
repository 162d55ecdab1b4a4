"""One timeout for a worker's whole Redis client instead of one per command.

The arq workers' clients carry no per-command ``socket_timeout``: redis-py puts an
``asyncio.wait_for`` (a task of its own) around every write and a timeout context around every
read, which cost about a third of a no-op job's drain rate beside arq alone (docs/benchmarks.md).
A Redis that accepts and never answers (frozen, a stalled proxy) must still not hold the workers
for good, so :class:`RedisWatchdog` asks each worker's client for a ``PING`` every
``interval`` seconds, bounded by ``REDIS_TIMEOUT_SECONDS``. A ping that is not answered in time cuts
every connection of that client: each command waiting on it fails as a lost connection, which
the workers' supervisor treats as Redis being down (it waits for Redis and starts again, as after
a refused connection). A frozen Redis is noticed within ``interval + timeout`` instead of
``timeout``; a refused or reset connection still fails each command at once, without the watchdog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from redis.asyncio import Redis

log = logging.getLogger(__name__)

Down = tuple[type[BaseException], ...]


async def cut(client: Redis) -> None:
    """Close every connection of ``client`` now, those in use too: a command waiting on one of them
    reads the end of its stream and fails as a lost connection. Aborted, not closed: closing waits
    for unsent bytes to be written, which a Redis that stopped reading never lets happen."""
    pool = client.connection_pool
    # redis-py keeps no public list of the connections in use.
    for connection in list(pool._in_use_connections):
        writer = getattr(connection, "_writer", None)
        if writer is not None:
            writer.transport.abort()
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0):
            await pool.disconnect(inuse_connections=False)


class RedisWatchdog:
    """Pings each client every ``interval`` seconds; one not answered within ``timeout`` is cut."""

    def __init__(
        self,
        clients: Callable[[], Sequence[Redis | None]],
        *,
        timeout: float,
        interval: float,
        down: Down,
        on_frozen: Callable[[BaseException], None],
    ) -> None:
        self.clients = clients
        self.timeout = timeout
        self.interval = interval
        self.down = down
        self.on_frozen = on_frozen
        """Told when a ping went unanswered (the outage's log line), before the cut."""

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for client in self.clients():
                if client is None:
                    continue  # its worker was closed (a shutdown under way)
                try:
                    await self.check(client)
                except Exception:
                    log.exception("the Redis watchdog's check failed; going on")

    async def check(self, client: Redis) -> bool:
        """Whether ``client``'s Redis answered a ping in time; if it did not, it is cut."""
        try:
            async with asyncio.timeout(self.timeout):
                await client.ping()
        except TimeoutError as exc:
            self.on_frozen(exc)
            await cut(client)
            return False
        except self.down:
            return False  # refused or reset: every command fails at once by itself
        return True
