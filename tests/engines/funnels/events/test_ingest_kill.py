"""Group commit under SIGKILL (FN-13): a ``serve`` process is killed while hundreds of event
requests are in flight; every request it answered 202 has its event in the database afterwards
(an answer is given only after the event's batch committed)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.engines.funnels.events.models import InboundEvent
from app.runtime import Runtime
from app.settings import Settings
from tests.conftest import eventually
from tests.scheduling.test_chaos_serve import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_fn13_no_event_answered_2xx_is_missing_after_a_sigkill_mid_burst(
    runtime: Runtime, settings: Settings, tenant, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.url,
        "REDIS_URL": "",
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "KEY_FILE": str(tmp_path / "keys.json"),
        "SWEEPERS_ENABLED": "false",
        "FUNNEL_INGEST_WINDOW_MS": "5",
    }
    serve = Serve(env, tmp_path / "serve.log")
    serve.start()
    answered: list[str] = []
    try:
        await serve.healthy()
        url = f"http://127.0.0.1:{serve.port}/hooks/funnels/events"
        headers = {"X-Ingest-Token": tenant.ingest_token}
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            killed = asyncio.Event()

            async def sender(worker: int) -> None:
                for i in range(10_000):
                    if killed.is_set():
                        return
                    event_id = f"k-{worker}-{i}"
                    body = {"event_id": event_id, "name": "x", "contact": {"email": "a@b.co"}}
                    try:
                        response = await client.post(url, json=body, headers=headers)
                    except httpx.HTTPError:
                        return  # the process died with this request unanswered
                    if response.status_code == 202:
                        answered.append(event_id)

            async def killer() -> None:
                async def enough() -> bool:
                    return len(answered) >= 300

                await eventually(enough, timeout=120, interval=0.005)
                serve.kill()
                killed.set()

            await asyncio.gather(killer(), *(sender(w) for w in range(64)))
    finally:
        serve.terminate()
    async with runtime.db.read() as session:
        stored = set(await session.scalars(select(InboundEvent.external_id)))
    assert len(answered) >= 300
    missing = [e for e in answered if e not in stored]
    assert missing == []
