"""Operations: /health, /ready (503 when the database or the queue is unreachable), /metrics,
OpenAPI, and structured JSON logs carrying the request's correlation id."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.logs import configure_logging
from app.runtime import Runtime
from app.settings import MAX_REDIS_TIMEOUT_SECONDS, Settings
from app.wiring import assemble
from tests.conftest import auth, metrics_auth
from tests.factories import Tenant
from tests.harness.app_client import app_client, asgi_transport
from tests.platform.conftest import ApiTenant
from tests.scheduling.redis_proxy import silent_port

CLOSED_PORT = 1  # nothing listens on tcpmux here


async def test_health_is_ok(client: httpx.AsyncClient) -> None:
    r = await client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


async def test_ready_when_database_and_queue_answer(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.get("/ready")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ready"
    assert body["database"] is True
    assert body["queue"] is True
    assert body["queue_backend"] == runtime.queue.backend
    assert body["platform_stop"] is False


@pytest.fixture
async def broken_client(
    request: pytest.FixtureRequest, settings: Settings, clock: ManualClock
) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose database (or queue) URL points at a closed port."""
    from app.web.app import create_app

    broken = request.param
    if broken == "database":
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{CLOSED_PORT}/nowhere"
        changed = dataclasses.replace(
            settings, database=dataclasses.replace(settings.database, url=url)
        )
    else:
        url = f"redis://127.0.0.1:{CLOSED_PORT}/0"
        changed = dataclasses.replace(
            settings, queue=dataclasses.replace(settings.queue, redis_url=url)
        )
    rt = assemble(changed, clock)
    app = create_app(changed, rt, background=False)
    try:
        async with httpx.AsyncClient(transport=asgi_transport(app), base_url="http://t") as c:
            yield c
    finally:
        await rt.aclose()


@pytest.mark.parametrize("broken_client", ["database", "queue"], indirect=True)
async def test_ready_is_503_when_a_dependency_is_down(
    broken_client: httpx.AsyncClient, request: pytest.FixtureRequest
) -> None:
    r = await broken_client.get("/ready")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "unavailable"
    broken = request.node.callspec.params["broken_client"]
    assert body[broken] is False
    # Liveness does not depend on them.
    assert (await broken_client.get("/health")).status_code == 200


@pytest.mark.parametrize("broken_client", ["queue"], indirect=True)
async def test_not_ready_is_logged_as_a_warning_not_a_server_error(
    broken_client: httpx.AsyncClient, json_log: io.StringIO
) -> None:
    """A 503 from /ready is the probe's answer: log scanners that alert on errors stay quiet."""
    assert (await broken_client.get("/ready")).status_code == 503
    lines = [json.loads(line) for line in json_log.getvalue().splitlines() if line.strip()]
    access = [e for e in lines if e.get("logger") == "app.access" and e.get("path") == "/ready"]
    assert [e["level"] for e in access] == ["warning"]


async def test_metrics_are_prometheus_text_with_sweep_and_job_metrics(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/metrics", headers=metrics_auth())
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    for name in (
        "sweepline_sweep_duration_seconds",
        "sweepline_sweep_lag_seconds",
        "sweepline_sweep_failures_total",
        "sweepline_due_lag_seconds",
        "sweepline_jobs_queued",
        "sweepline_jobs_running",
        "sweepline_jobs_dead",
        "sweepline_jobs_finished_total",
        "sweepline_outbound_calls_total",
        "sweepline_runs_leased_total",
    ):
        assert f"# TYPE {name}" in r.text, name
    assert "\nsweepline_jobs_queued 0.0" in r.text
    assert "\nsweepline_job_queue_up 1.0" in r.text


@pytest.mark.parametrize("broken_client", ["queue"], indirect=True)
async def test_metrics_while_the_queue_is_down_say_so_without_a_traceback_each_scrape(
    broken_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue's figures are left out (their last values would look current) and
    ``sweepline_job_queue_up`` is 0; the other metrics are served, and the outage is one log line
    (the queue's own), however many scrapes there are."""
    caplog.set_level(logging.INFO)
    for _ in range(3):
        r = await broken_client.get("/metrics", headers=metrics_auth())
        assert r.status_code == 200
        assert "\nsweepline_job_queue_up 0.0" in r.text
        for name in ("sweepline_jobs_queued", "sweepline_jobs_running", "sweepline_jobs_dead"):
            assert f"# TYPE {name} " not in r.text
            assert f"\n{name} " not in r.text
        assert "# TYPE sweepline_sweep_lag_seconds" in r.text
    assert [r for r in caplog.records if r.exc_info] == []
    outage = [r for r in caplog.records if r.name == "app.scheduling.unavailable"]
    assert [r.levelname for r in outage] == ["WARNING"]
    assert [r for r in caplog.records if r.name == "app.web.ops"] == []


async def test_openapi_lists_the_platform_routes(client: httpx.AsyncClient) -> None:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    paths = spec["paths"]
    for path in (
        "/api/v1/workspace",
        "/api/v1/api-keys",
        "/api/v1/api-keys/{key_id}",
        "/api/v1/members",
        "/api/v1/members/{user_id}",
        "/api/v1/secrets",
        "/api/v1/secrets/{name}",
        "/api/v1/ingest-token/rotate",
        "/api/v1/queue",
        "/api/v1/sweepers",
        "/health",
        "/ready",
    ):
        assert path in paths, path
    assert {"get", "post"} <= set(paths["/api/v1/api-keys"])
    params = {p["name"] for p in paths["/api/v1/api-keys"]["get"]["parameters"]}
    assert {"limit", "cursor"} <= params
    created = paths["/api/v1/api-keys"]["post"]["responses"]["201"]
    assert "NewApiKeyOut" in json.dumps(created)
    # Dashboard pages are not part of the API description.
    assert "/login" not in paths


@pytest.fixture
def json_log() -> Any:
    """Logging configured as ``LOG_FORMAT=json`` does it, writing into a buffer."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    configure_logging("json", "INFO")
    buffer = io.StringIO()
    root.handlers[0].setStream(buffer)  # type: ignore[attr-defined]
    try:
        yield buffer
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


async def test_json_log_line_carries_the_request_id(
    client: httpx.AsyncClient, api_tenant: ApiTenant, json_log: io.StringIO
) -> None:
    tenant = api_tenant
    r = await client.get("/api/v1/workspace", headers=auth(tenant))
    request_id = r.headers["x-request-id"]
    assert request_id
    lines = [json.loads(line) for line in json_log.getvalue().splitlines() if line.strip()]
    access = [
        e for e in lines if e.get("logger") == "app.access" and e.get("path") == "/api/v1/workspace"
    ]
    assert len(access) == 1
    entry = access[0]
    assert entry["correlation_id"] == request_id
    assert entry["status"] == 200
    assert entry["method"] == "GET"
    assert entry["level"] == "info"
    assert isinstance(entry["duration_ms"], float)
    assert tenant.api_key not in json_log.getvalue()


async def test_each_request_gets_its_own_id(client: httpx.AsyncClient) -> None:
    a = (await client.get("/health")).headers["x-request-id"]
    b = (await client.get("/health")).headers["x-request-id"]
    assert a != b
    assert re.fullmatch(r"[0-9a-f]{16}", a)


def test_request_ids_of_two_processes_do_not_collide() -> None:
    """Ids are a per-process random prefix and a counter: two processes (or a restart) start from
    different prefixes, so the first ids each hands out differ."""
    program = "from app.web.app import next_request_id; print(next_request_id())"
    ids = {
        subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(ids) == 2
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


async def test_lists_paginate_with_a_cursor(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for i in range(4):
        await client.post("/api/v1/api-keys", json={"name": f"k{i}"}, headers=auth(tenant))
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = (await client.get(f"/api/v1/api-keys?{query}", headers=auth(tenant))).json()
        assert len(page["items"]) <= 2
        seen += [k["name"] for k in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["tests", "k0", "k1", "k2", "k3"]
    assert pages == 3
    first = (await client.get("/api/v1/members?limit=1", headers=auth(tenant))).json()
    assert len(first["items"]) == 1
    rest = (
        await client.get(
            f"/api/v1/members?limit=200&cursor={first['next_cursor']}", headers=auth(tenant)
        )
    ).json()
    assert len(rest["items"]) == 1
    assert rest["next_cursor"] is None
    assert first["items"][0]["email"] != rest["items"][0]["email"]


async def test_sweepers_lists_every_registered_sweep(runtime: Runtime) -> None:
    from app.web.ops import sweeper_overview

    listed = await sweeper_overview(runtime)
    assert {s.name for s in listed} == {s.name for s in runtime.sweeps}
    assert all(s.ticks == 0 and s.last_tick_at is None for s in listed)


@pytest.mark.parametrize("path", ["/api/v1/queue", "/api/v1/sweepers"])
async def test_platform_wide_data_is_refused_to_a_workspace_key(
    client: httpx.AsyncClient, tenant: Tenant, path: str
) -> None:
    """Issue 13, item 6: the queue's counts and dead jobs (with their errors) and the sweepers are
    the whole instance's; a tenant's key hears 403 and where its own jobs are."""
    response = await client.get(path, headers=auth(tenant))
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert "/api/v1/jobs" in response.json()["message"]


async def test_ready_answers_in_time_when_a_dependency_does_not(
    settings: Settings, clock: ManualClock
) -> None:
    """A queue that never answers its ping (a Redis that accepts the connection and says nothing,
    with a timeout longer than the check's): /ready gives up on it after its check time and
    answers 503 naming it, instead of leaving the probe without an answer."""
    with silent_port() as port:
        queue = dataclasses.replace(
            settings.queue,
            redis_url=f"redis://127.0.0.1:{port}/0",
            redis_timeout_seconds=MAX_REDIS_TIMEOUT_SECONDS,
        )
        async with app_client(dataclasses.replace(settings, queue=queue), clock) as client:
            # Without the check's own bound the request would wait out the Redis timeout.
            async with asyncio.timeout(MAX_REDIS_TIMEOUT_SECONDS / 2):
                r = await client.get("/ready")
    assert r.status_code == 503
    body = r.json()
    assert (body["status"], body["database"], body["queue"]) == ("unavailable", True, False)
