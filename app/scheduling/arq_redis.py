"""How the arq backend talks to Redis: the client (one bounded try per call), the payload
envelope (msgpack, no pickle), and the score that carries a job's priority.

Priorities. An arq queue is one Redis sorted set scored by the time a job may start, and a worker
starts due jobs lowest score first, so a priority is expressed as that score
(:func:`timing`): an urgent job (priority below 0) is scored in a band far in the past, one
band per level, and starts before every ordinary due job of its queue, the bands in priority
order; priority 0 keeps the plain time order (retries and deferred jobs included, as before); a
less urgent job (priority above 0) waits ``priority`` seconds (at most a minute), so the jobs due
beside it go first. A job deferred with ``run_at`` into the future keeps its time: once due it is
in time order, since arq cannot re-score a waiting job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

import msgspec
import redis.exceptions
from arq.connections import ArqRedis, RedisSettings
from arq.constants import expires_extra_ms, job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms, to_ms, to_unix_ms
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff


def serialize(obj: Any) -> bytes:
    return msgspec.msgpack.encode(obj)


def deserialize(raw: bytes) -> Any:
    return msgspec.msgpack.decode(raw)


PRIORITY_BAND = timedelta(days=365 * 30)
"""How far into the past each level of urgency scores a due job: wider than any span of enqueue
times, so the bands never overlap."""
MAX_URGENCY = 100
"""Levels below 0 told apart (100 bands of 30 years stay exact in a Redis score, a double)."""
LESS_URGENT_STEP = timedelta(seconds=1)
"""The wait of a less urgent job per level above 0 ..."""
MAX_LESS_URGENT_WAIT = timedelta(minutes=1)
"""... and at most this long."""
JOB_EXPIRY = timedelta(days=1)
"""How long an urgent job is kept in Redis: arq's own default, given explicitly because arq derives
it from the score, which the band moves into the past."""


DEFAULT_TIMEOUT_SECONDS = 2.0
"""``REDIS_TIMEOUT_SECONDS``' default (app/settings.py)."""

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
"""What Redis not answering raises (refused, reset, timed out, still loading its data set); an
error Redis answers with (a wrong type, an unknown command) is not an outage."""


def redis_client(
    settings: RedisSettings, timeout: float, *, per_command: bool = True, **arq_options: Any
) -> ArqRedis:
    """A client that connects on first use (not here) and reconnects on the call after a
    failure; each connection and each command is tried once, for at most ``timeout`` seconds
    (``per_command`` False: the connection only; the caller bounds the commands, as the
    workers' :class:`~app.scheduling.arq_watchdog.RedisWatchdog` does). The connection options
    are :func:`arq.connections.create_pool`'s."""
    return ArqRedis(
        host=settings.host,
        port=settings.port,
        unix_socket_path=settings.unix_socket_path,
        db=settings.database,
        username=settings.username,
        password=settings.password,
        ssl=settings.ssl,
        ssl_keyfile=settings.ssl_keyfile,
        ssl_certfile=settings.ssl_certfile,
        ssl_cert_reqs=settings.ssl_cert_reqs,
        ssl_ca_certs=settings.ssl_ca_certs,
        ssl_ca_data=settings.ssl_ca_data,
        ssl_check_hostname=settings.ssl_check_hostname,
        max_connections=settings.max_connections,
        encoding="utf8",
        socket_connect_timeout=timeout,
        # Also bounds the handshake after connecting (CLIENT SETINFO), where a Redis that
        # accepts connections but never answers would otherwise hold the caller for good.
        socket_timeout=timeout if per_command else None,
        # Explicit: newer redis-py versions retry with backoff by default.
        retry=RedisRetry(NoBackoff(), 0),
        **arq_options,
    )


@dataclass(frozen=True, slots=True)
class Timing:
    """When arq may start a job: ``enqueue_job``'s ``_defer_until`` / ``_defer_by`` / ``_expires``."""

    defer_until: datetime | None = None
    defer_by: timedelta | None = None
    expires: timedelta | None = None


def timing(now: datetime, run_at: datetime | None, priority: int) -> Timing:
    """The start time arq orders a job by (see "Priorities" above). A due job's band is relative to
    arq's own enqueue time (``_defer_by``), as an ordinary job's start time is."""
    deferred = run_at is not None and run_at > now
    if priority > 0:
        wait = min(MAX_LESS_URGENT_WAIT, LESS_URGENT_STEP * priority)
        if deferred:
            assert run_at is not None
            return Timing(defer_until=run_at + wait)
        return Timing(defer_by=wait)
    if priority < 0 and not deferred:
        return Timing(defer_by=-PRIORITY_BAND * min(MAX_URGENCY, -priority), expires=JOB_EXPIRY)
    return Timing(defer_until=run_at)


_PUBLISH = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('PSETEX', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""
"""Queue one job unless a job or a result of its id exists: arq's ``enqueue_job`` (a watched
transaction of three round trips a job) as one script, so a batch of jobs is one round trip."""


async def publish_jobs(
    pool: ArqRedis, jobs: Sequence[tuple[str, bytes, str | None, str]], when: Timing
) -> None:
    """Queue ``(function, payload, job id or None, queue name)`` jobs as ``enqueue_job`` would,
    with the same keys, envelope, score and expiry, in one pipelined round trip."""
    script = pool.register_script(_PUBLISH)
    now_ms = timestamp_ms()
    if when.defer_until is not None:
        score = to_unix_ms(when.defer_until)
    elif when.defer_by:
        score = now_ms + to_ms(when.defer_by)
    else:
        score = now_ms
    expires_ms = to_ms(when.expires) or score - now_ms + expires_extra_ms
    async with pool.pipeline(transaction=False) as pipe:
        for function, raw, job_id, queue_name in jobs:
            key = job_id or uuid4().hex
            envelope = serialize_job(function, (raw,), {}, None, now_ms, serializer=serialize)
            await script(
                keys=[job_key_prefix + key, result_key_prefix + key, queue_name],
                args=[expires_ms, envelope, score, key],
                client=pipe,
            )
        await pipe.execute()
