"""A request that queues a job while the job queue's Redis is down answers 503 with the error
body (``queue_unavailable``) within the Redis timeout, and nothing it would have written stays:
a client can repeat it. Redis down is a real closed port."""

from __future__ import annotations

import time

import httpx
from sqlalchemy import func, select

from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from app.scheduling.bulk_models import BulkJob
from tests.conftest import auth
from tests.factories import Tenant
from tests.scheduling.redis_proxy import closed_port


async def test_a_request_that_queues_a_job_answers_503_and_changes_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Requests find the queue on the runtime: this one's Redis refuses connections.
    usual = runtime.queue
    runtime.queue = ArqQueue(
        runtime.db,
        runtime.clock,
        f"redis://127.0.0.1:{closed_port()}/0",
        "sweepline-test-down",
        timeout=0.5,
    )
    try:
        started = time.monotonic()
        response = await client.post(
            "/api/v1/funnels/contacts/import",
            json={"csv": "email\na@x.test\n"},
            headers=auth(tenant),
        )
        elapsed = time.monotonic() - started
    finally:
        await runtime.queue.aclose()
        runtime.queue = usual
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "queue_unavailable"
    assert "nothing was changed" in body["message"]
    assert elapsed < 3.0  # arq's own connection retries took 5 s before failing
    async with runtime.db.read() as session:
        assert (await session.execute(select(func.count()).select_from(BulkJob))).scalar_one() == 0
