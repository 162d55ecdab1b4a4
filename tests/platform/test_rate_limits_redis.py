"""Rate limits in server mode (issue 31, item 3): the buckets are in Redis, so processes share
them and concurrent requests cannot overdraw them; Redis not answering lets requests through
(fail open) with one log line. The limits are settings (PL-15). The tests marked ``redis`` need
``TEST_REDIS_URL``."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.db.session import Database
from app.platform.rate_limits import Bucket, Limit
from app.platform.rate_limits_redis import RedisRateLimiter
from app.runtime import Runtime
from app.settings import Settings
from app.settings_web import RateLimitSettings
from app.wiring import assemble
from tests.conftest import auth, truncate_all, with_own_queue
from tests.factories import create_tenant
from tests.harness.app_client import asgi_transport

OFF = RateLimitSettings(
    key_read_burst=0, key_write_burst=0, workspace_read_burst=0, workspace_write_burst=0
)

Make = Callable[..., Any]


@pytest.fixture
async def apps(settings: Settings, shared_db: Database, clock: ManualClock) -> AsyncIterator[Make]:
    """``make(n, redis_url=…, **limits)``: ``n`` clients, each on an app with a runtime of its
    own (as ``n`` processes), all with the same settings: one Redis namespace."""
    runtimes: list[Runtime] = []
    clients: list[httpx.AsyncClient] = []

    def make(n: int, *, redis_url: str | None = None, **limits: Any) -> list[httpx.AsyncClient]:
        from app.web.app import create_app

        base = with_own_queue(settings)
        queue = base.queue
        if redis_url is not None:
            queue = dataclasses.replace(queue, redis_url=redis_url, redis_timeout_seconds=0.5)
        own = dataclasses.replace(base, queue=queue, rate_limits=dataclasses.replace(OFF, **limits))
        made = []
        for _ in range(n):
            rt = assemble(own, clock, db=shared_db)
            runtimes.append(rt)
            client = httpx.AsyncClient(
                transport=asgi_transport(create_app(own, rt, background=False)),
                base_url="http://testserver",
            )
            clients.append(client)
            made.append(client)
        return made

    try:
        yield make
    finally:
        for client in clients:
            await client.aclose()
        for rt in runtimes:
            await rt.resources.aclose()
            await rt.queue.aclose()
        await truncate_all(shared_db)


async def first_runtime_tenant(shared_db: Database, settings: Settings, clock: ManualClock) -> Any:
    rt = assemble(settings, clock, db=shared_db)
    try:
        return await create_tenant(rt, name="Acme")
    finally:
        await rt.queue.aclose()


@pytest.mark.redis
async def test_two_processes_sharing_redis_share_a_bucket(
    apps: Make, settings: Settings, shared_db: Database, clock: ManualClock
) -> None:
    first, second = apps(2, key_read_burst=5, key_read_per_second=0.01)
    tenant = await first_runtime_tenant(shared_db, settings, clock)
    statuses = []
    for n in range(5):
        client = first if n % 2 == 0 else second
        r = await client.get("/api/v1/api-keys", headers=auth(tenant))
        statuses.append(r.status_code)
        assert r.headers["RateLimit-Remaining"] == str(4 - n)
    assert statuses == [200] * 5
    for client in (first, second):
        refused = await client.get("/api/v1/api-keys", headers=auth(tenant))
        assert refused.status_code == 429
        assert refused.json()["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1


async def test_parallel_reads_and_writes_with_one_key_cannot_overdraw_its_buckets(
    apps: Make, settings: Settings, shared_db: Database, clock: ManualClock
) -> None:
    """300 parallel GETs and 100 parallel POSTs with one key, over two processes sharing Redis
    (one process on the embedded default when the tests have no Redis): 429s appear, and no more
    requests get through than the bursts plus what refilled meanwhile. The rates are low so that
    429s appear however slow the machine: under load 400 requests take tens of seconds."""
    read_burst, read_rate, write_burst, write_rate = 100, 1.0, 30, 0.5
    clients = apps(
        2 if settings.queue.uses_redis else 1,
        key_read_burst=read_burst,
        key_read_per_second=read_rate,
        key_write_burst=write_burst,
        key_write_per_second=write_rate,
    )
    tenant = await first_runtime_tenant(shared_db, settings, clock)
    started = time.monotonic()
    reads = [
        clients[n % len(clients)].get("/api/v1/api-keys", headers=auth(tenant)) for n in range(300)
    ]
    writes = [
        clients[n % len(clients)].post("/api/v1/api-keys", json={}, headers=auth(tenant))
        for n in range(100)
    ]
    answers = await asyncio.gather(*reads, *writes)
    elapsed = time.monotonic() - started
    read_statuses = [r.status_code for r in answers[:300]]
    write_statuses = [r.status_code for r in answers[300:]]
    assert set(read_statuses) <= {200, 429}
    assert set(write_statuses) <= {422, 429}
    assert read_statuses.count(429) > 0
    assert write_statuses.count(429) > 0
    assert read_statuses.count(200) <= read_burst + read_rate * elapsed + 1
    assert write_statuses.count(422) <= write_burst + write_rate * elapsed + 1
    assert read_statuses.count(200) >= read_burst
    assert write_statuses.count(422) >= write_burst


@pytest.mark.redis
async def test_the_redis_buckets_refill_on_redis_time(settings: Settings) -> None:
    limiter = RedisRateLimiter(
        settings.queue.redis_url,
        with_own_queue(settings).queue.arq_queue_name,
        timeout=1.0,
        monotonic=time.monotonic,
    )
    bucket = Bucket("key:1:write", Limit(2, 20))
    try:
        assert (await limiter.take([bucket])).remaining == 1  # type: ignore[union-attr]
        assert (await limiter.take([bucket])).remaining == 0  # type: ignore[union-attr]
        refused = await limiter.take([bucket])
        assert refused is not None
        assert not refused.allowed
        assert refused.retry_after_seconds == 1
        await asyncio.sleep(0.2)  # 20 a second: about four tokens' worth, capped at the burst
        again = await limiter.take([bucket])
        assert again is not None
        assert again.allowed
        assert again.remaining == 1
        ttl = await limiter.client.pttl(limiter.prefix + bucket.name)
        assert 0 < ttl <= 2000  # forgotten once it would be full again
    finally:
        await limiter.aclose()


async def test_requests_go_on_when_redis_does_not_answer_and_the_outage_is_logged_once(
    apps: Make,
    settings: Settings,
    shared_db: Database,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fail open: a Redis that refuses connections costs no request its answer (only the first
    one of each second tries it), and the log says so once, not per request."""
    (client,) = apps(1, redis_url="redis://127.0.0.1:9/0", key_read_burst=1, key_read_per_second=1)
    tenant = await first_runtime_tenant(shared_db, settings, clock)
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            r = await client.get("/api/v1/api-keys", headers=auth(tenant))
            assert r.status_code == 200
            assert "RateLimit-Limit" not in r.headers
        clock.advance(1.5)  # the next request tries Redis again, and fails again: no new line
        assert (await client.get("/api/v1/api-keys", headers=auth(tenant))).status_code == 200
    outage = [rec for rec in caplog.records if "rate limits" in rec.getMessage()]
    assert len(outage) == 1
    assert "not reachable" in outage[0].getMessage()
