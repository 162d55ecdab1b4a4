"""Rate limits per API key and per workspace (issue 31, item 3), on the embedded default's
in-process buckets and a :class:`ManualClock`: token buckets (a burst, refilled every second),
reads and writes counted apart, 429 ``rate_limited`` with ``Retry-After`` and the ``RateLimit-*``
headers, every limit configurable and 0 turning it off (PL-15), the 429 in the OpenAPI document
(PL-11). Sign-in has its own throttle (PL-6, tests/platform/test_throttle.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.db.session import Database
from app.platform import service
from app.platform.rate_limits import Bucket, InProcessRateLimiter, Limit
from app.platform.rate_limits_redis import RedisRateLimiter
from app.runtime import Runtime
from app.settings import Settings, load_settings
from app.settings_fields import SettingsError
from app.settings_web import RateLimitSettings
from app.web.rate_limits import build_limiter
from app.wiring import assemble
from tests.conftest import auth, truncate_all
from tests.factories import Tenant, create_tenant
from tests.harness.app_client import asgi_transport
from tests.platform.conftest import sign_in

OFF = RateLimitSettings(
    key_read_burst=0,
    key_write_burst=0,
    workspace_read_burst=0,
    workspace_write_burst=0,
)

AppFactory = Callable[..., Awaitable[tuple[httpx.AsyncClient, Runtime]]]


@pytest.fixture
async def limited(
    settings: Settings, shared_db: Database, clock: ManualClock
) -> AsyncIterator[AppFactory]:
    """``await limited(key_read_burst=3, …)``: a client on an app with only those limits (the
    others off), on the embedded default's in-process buckets and the test's clock."""
    runtimes: list[Runtime] = []
    clients: list[httpx.AsyncClient] = []

    async def make(**limits: Any) -> tuple[httpx.AsyncClient, Runtime]:
        from app.web.app import create_app

        own = dataclasses.replace(
            settings,
            queue=dataclasses.replace(settings.queue, redis_url=""),
            rate_limits=dataclasses.replace(OFF, **limits),
        )
        rt = assemble(own, clock, db=shared_db)
        runtimes.append(rt)
        app = create_app(own, rt, background=False)
        client = httpx.AsyncClient(transport=asgi_transport(app), base_url="http://testserver")
        clients.append(client)
        return client, rt

    try:
        yield make
    finally:
        for client in clients:
            await client.aclose()
        for rt in runtimes:
            await rt.resources.aclose()
            await rt.queue.aclose()
        await truncate_all(shared_db)


async def second_key(runtime: Runtime, tenant: Tenant) -> dict[str, str]:
    async with runtime.db.write() as uow:
        _, raw = await service.create_api_key(
            uow.session, workspace_id=tenant.workspace_id, name="second", now=runtime.clock.now()
        )
    return {"Authorization": f"Bearer {raw}"}


async def read(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    return await client.get("/api/v1/api-keys", headers=headers)


async def write(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    """A write the guard counts and the handler then refuses (422): nothing is created."""
    return await client.post("/api/v1/api-keys", json={}, headers=headers)


async def test_a_key_gets_its_burst_then_429_with_retry_after_and_ratelimit_headers(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(key_read_burst=3, key_read_per_second=1)
    tenant = await create_tenant(rt, name="Acme")
    for remaining in (2, 1, 0):
        r = await read(client, auth(tenant))
        assert r.status_code == 200, r.text
        assert r.headers["RateLimit-Limit"] == "3"
        assert r.headers["RateLimit-Remaining"] == str(remaining)
        assert r.headers["RateLimit-Reset"] == str(3 - remaining)
        assert "Retry-After" not in r.headers
    refused = await read(client, auth(tenant))
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "rate_limited"
    assert set(body) == {"code", "message", "details"}
    assert "this API key" in body["message"]
    assert "Retry in 1 s" in body["message"]
    assert refused.headers["Retry-After"] == "1"
    assert refused.headers["RateLimit-Limit"] == "3"
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert refused.headers["RateLimit-Reset"] == "3"
    # Refused requests take nothing: the bucket still refills in one second.
    for _ in range(5):
        assert (await read(client, auth(tenant))).status_code == 429


async def test_the_bucket_refills_per_second_up_to_its_burst(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(key_read_burst=3, key_read_per_second=2)
    tenant = await create_tenant(rt, name="Acme")
    for _ in range(3):
        assert (await read(client, auth(tenant))).status_code == 200
    refused = await read(client, auth(tenant))
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"  # half a second, rounded up
    clock.advance(0.5)
    assert (await read(client, auth(tenant))).status_code == 200
    assert (await read(client, auth(tenant))).status_code == 429
    # A long pause refills the bucket to its burst, never beyond.
    clock.advance(3600)
    statuses = [(await read(client, auth(tenant))).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


async def test_reads_and_writes_have_buckets_of_their_own(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(
        key_read_burst=2, key_read_per_second=1, key_write_burst=1, key_write_per_second=1
    )
    tenant = await create_tenant(rt, name="Acme")
    assert (await write(client, auth(tenant))).status_code == 422
    refused = await write(client, auth(tenant))
    assert refused.status_code == 429
    assert "Too many writes" in refused.json()["message"]
    assert refused.headers["RateLimit-Limit"] == "1"
    # Writes spent, reads untouched (and the other way round).
    assert [(await read(client, auth(tenant))).status_code for _ in range(3)] == [200, 200, 429]
    clock.advance(1)
    assert (await write(client, auth(tenant))).status_code == 422


async def test_another_key_of_the_workspace_is_not_held_by_the_first(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(key_read_burst=2, key_read_per_second=1)
    tenant = await create_tenant(rt, name="Acme")
    other = await second_key(rt, tenant)
    for _ in range(2):
        assert (await read(client, auth(tenant))).status_code == 200
    assert (await read(client, auth(tenant))).status_code == 429
    r = await read(client, other)
    assert r.status_code == 200
    assert r.headers["RateLimit-Remaining"] == "1"


async def test_a_workspace_limit_holds_all_its_keys_together_and_no_other_workspace(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(
        key_read_burst=100,
        key_read_per_second=10,
        workspace_read_burst=3,
        workspace_read_per_second=1,
    )
    tenant = await create_tenant(rt, name="Acme")
    elsewhere = await create_tenant(rt, name="Globex")
    other = await second_key(rt, tenant)
    assert (await read(client, auth(tenant))).status_code == 200
    assert (await read(client, other)).status_code == 200
    last = await read(client, auth(tenant))
    assert last.status_code == 200
    # The workspace's bucket is the tighter one: it is the one the headers describe.
    assert last.headers["RateLimit-Limit"] == "3"
    assert last.headers["RateLimit-Remaining"] == "0"
    refused = await read(client, other)
    assert refused.status_code == 429
    assert "this workspace" in refused.json()["message"]
    assert (await read(client, auth(elsewhere))).status_code == 200
    clock.advance(1)
    assert (await read(client, other)).status_code == 200


async def test_a_signed_in_person_is_limited_like_a_key_and_shares_the_workspace_bucket(
    limited: AppFactory, clock: ManualClock
) -> None:
    client, rt = await limited(
        key_read_burst=2,
        key_read_per_second=1,
        workspace_read_burst=3,
        workspace_read_per_second=1,
    )
    tenant = await create_tenant(rt, name="Acme")
    assert (await sign_in(client, tenant.email, tenant.password)).status_code in (302, 303)
    pages = [await client.get("/") for _ in range(3)]
    assert [p.status_code for p in pages] == [200, 200, 429]
    assert "Too many reads by this account" in pages[2].text
    assert pages[2].headers["Retry-After"] == "1"
    # The person used two of the workspace's three reads: the key gets the last one.
    assert (await read(client, auth(tenant))).status_code == 200
    assert (await read(client, auth(tenant))).status_code == 429


async def test_zero_turns_a_limit_off(limited: AppFactory, clock: ManualClock) -> None:
    client, rt = await limited(
        # A burst without a refill is no rate either: 0 per second turns the limit off too.
        key_read_burst=1,
        key_read_per_second=0,
        key_write_burst=0,
        key_write_per_second=5,
    )
    tenant = await create_tenant(rt, name="Acme")
    for _ in range(30):
        r = await read(client, auth(tenant))
        assert r.status_code == 200
        assert "RateLimit-Limit" not in r.headers
        assert (await write(client, auth(tenant))).status_code == 422


async def test_public_routes_are_not_limited(limited: AppFactory, clock: ManualClock) -> None:
    client, _ = await limited(key_read_burst=1, key_read_per_second=1)
    for _ in range(5):
        r = await client.get("/health")
        assert r.status_code == 200
        assert "RateLimit-Limit" not in r.headers


def test_the_limits_are_settings_with_the_documented_defaults_pl15() -> None:
    limits = load_settings({}).rate_limits
    assert (limits.key_read_burst, limits.key_read_per_second) == (200, 20)
    assert (limits.key_write_burst, limits.key_write_per_second) == (60, 10)
    assert (limits.workspace_read_burst, limits.workspace_read_per_second) == (400, 40)
    assert (limits.workspace_write_burst, limits.workspace_write_per_second) == (120, 20)
    changed = load_settings(
        {"RATE_LIMIT_KEY_WRITE_BURST": "5", "RATE_LIMIT_WORKSPACE_READ_PER_SECOND": "0.5"}
    ).rate_limits
    assert changed.key_write_burst == 5
    assert changed.workspace_read_per_second == 0.5


@pytest.mark.parametrize(
    ("variable", "value"),
    [("RATE_LIMIT_KEY_READ_BURST", "-1"), ("RATE_LIMIT_WORKSPACE_WRITE_PER_SECOND", "nan")],
)
def test_a_negative_or_unusable_limit_is_refused_naming_the_variable(
    variable: str, value: str
) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_settings({variable: value})


def test_redis_keeps_the_buckets_when_the_deployment_has_one(runtime: Runtime) -> None:
    """Server mode shares the buckets between processes; the embedded default keeps them in the
    process (the queue's choice, REDIS_URL, decides both)."""
    embedded = dataclasses.replace(
        runtime.settings, queue=dataclasses.replace(runtime.settings.queue, redis_url="")
    )
    server = dataclasses.replace(
        runtime.settings,
        queue=dataclasses.replace(runtime.settings.queue, redis_url="redis://127.0.0.1:6379/0"),
    )
    runtime.settings = embedded
    assert isinstance(build_limiter(runtime), InProcessRateLimiter)
    runtime.settings = server
    assert isinstance(build_limiter(runtime), RedisRateLimiter)  # connects on first use only


async def test_a_refused_request_takes_nothing_from_its_other_buckets() -> None:
    clock = ManualClock()
    limiter = InProcessRateLimiter(clock.monotonic)
    key = Bucket("key:1:read", Limit(5, 1))
    workspace = Bucket("workspace:1:read", Limit(1, 1))
    assert (await limiter.take([key, workspace])).allowed
    refused = await limiter.take([key, workspace])
    assert not refused.allowed
    assert refused.bucket == workspace
    # The key's bucket still holds its four tokens.
    assert (await limiter.take([key])).remaining == 3


async def test_the_in_process_buckets_are_bounded() -> None:
    clock = ManualClock()
    limiter = InProcessRateLimiter(clock.monotonic, max_buckets=100)
    for n in range(1_000):
        await limiter.take([Bucket(f"key:{n}:read", Limit(10, 1))])
    assert len(limiter) == 100


async def test_the_openapi_document_gives_every_api_operation_its_429_pl11(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    operations = [
        operation
        for path, methods in document["paths"].items()
        if path.startswith("/api/")
        for operation in methods.values()
    ]
    assert operations
    for operation in operations:
        too_many = operation["responses"]["429"]
        assert too_many["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"
        }
        assert "``rate_limited``" in too_many["description"]
        assert "Retry-After" in too_many["description"]
