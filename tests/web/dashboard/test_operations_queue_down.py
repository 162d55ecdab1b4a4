"""The operations page while the job queue's Redis is not reachable: the page is served with the
sweepers, the dead jobs (kept in the database) and the workspace's activity, and says where the
queue's depth would be that the queue cannot be reached. Redis down is a real closed port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.dead_rows import record_dead_job
from tests.factories import Tenant
from tests.platform.conftest import sign_in
from tests.scheduling.redis_proxy import closed_port

NOTICE = "The job queue (Redis) is not reachable"


@contextmanager
def redis_down(runtime: Runtime) -> Iterator[ArqQueue]:
    usual = runtime.queue
    url = f"redis://127.0.0.1:{closed_port()}/0"
    runtime.queue = ArqQueue(runtime.db, runtime.clock, url, "sweepline-test-down", timeout=0.5)
    try:
        yield runtime.queue
    finally:
        runtime.queue = usual


async def test_the_operations_page_says_the_queue_is_unreachable_and_shows_the_rest(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await record_dead_job(
        runtime.db,
        runtime.clock,
        job_id="dead-1",
        name="funnels.ingest",
        payload=b"{}",
        attempts=5,
        error="RuntimeError: gave up",
    )
    await sign_in(client, tenant.email, tenant.password)
    with redis_down(runtime) as queue:
        try:
            page = await client.get("/ui/operations")
            partial = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
        finally:
            await queue.aclose()
    for response in (page, partial):
        assert response.status_code == 200, response.text
        html = response.text
        assert 'id="queue-unavailable"' in html
        assert NOTICE in html
        assert 'id="queue-depth"' not in html
        assert 'id="sweepers"' in html
        assert 'data-sweep="funnels.triggers"' in html
        assert "RuntimeError: gave up" in html  # the dead jobs are read from the database
    assert 'id="activity"' in page.text


async def test_the_operations_page_shows_the_queue_depth_when_it_answers(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/operations")
    assert page.status_code == 200
    assert 'id="queue-depth"' in page.text
    assert NOTICE not in page.text
