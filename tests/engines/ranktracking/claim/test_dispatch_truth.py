"""The dispatcher keeps its word: retries at the promised time (RT-31), answers that count only
work that reached the queue (RT-26, RT-27), and "latest results" from the last good run."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.claim.dispatch import dispatch_due, dispatch_tick
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import RES_HELD, Run, Schedule
from app.runtime import Runtime
from app.scheduling.arq_queue import ArqQueue
from tests.conftest import auth
from tests.engines.ranktracking.factories import available, fund, make_schedule
from tests.factories import Tenant


async def _schedule(runtime: Runtime, schedule_id: int) -> Schedule:
    async with runtime.db.read() as session:
        row = await session.get(Schedule, schedule_id)
        assert row is not None
        return row


async def _runs(runtime: Runtime, schedule_id: int) -> list[Run]:
    async with runtime.db.read() as session:
        return list(
            (
                await session.execute(
                    select(Run).where(Run.schedule_id == schedule_id).order_by(Run.id)
                )
            ).scalars()
        )


def _unreachable_broker(runtime: Runtime, clock: ManualClock) -> ArqQueue:
    return ArqQueue(runtime.db, clock, "redis://127.0.0.1:1/0", "unreachable")


async def test_rt31_skipped_dispatch_at_a_late_sweep_start_is_retried_by_the_next_sweep(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    """The 09:20 sweep starts 0.35 s late and cannot reach the worker: the retry is due at
    10:20:00 — the next sweep's nominal time — not at 10:20:00.35, which it would miss."""
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)  # daily, due 2026-03-03 09:00
    broker = _unreachable_broker(runtime, clock)
    clock.set(datetime(2026, 3, 3, 9, 20, 0, 350_000, tzinfo=UTC))
    # What the sweep's tick does, with the process's queue replaced by the unreachable broker.
    await dispatch_due(
        dataclasses.replace(RankTrackingDeps.of(runtime), queue=broker),
        clock.now(),
        due_by=datetime(2026, 3, 3, 9, 20, tzinfo=UTC),
    )
    await broker.aclose()
    (skipped,) = await _runs(runtime, schedule.id)
    assert (skipped.status, skipped.error_code) == ("skipped_dispatch", "dispatch_failed")
    row = await _schedule(runtime, schedule.id)
    assert row.retrying
    assert row.next_due_at == datetime(2026, 3, 3, 10, 20, tzinfo=UTC)

    clock.set(datetime(2026, 3, 3, 10, 20, 0, 410_000, tzinfo=UTC))
    await dispatch_tick(runtime.context(), datetime(2026, 3, 3, 10, 20, tzinfo=UTC))
    runs = await _runs(runtime, schedule.id)
    assert [r.status for r in runs] == ["skipped_dispatch", "dispatching"]
    row = await _schedule(runtime, schedule.id)
    assert not row.retrying
    # The normal frequency resumes on the original grid.
    assert row.next_due_at == datetime(2026, 3, 4, 9, 0, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def own_redis() -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Redis server of this test's own, so that the test can stop it."""
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    from redis.asyncio import Redis

    for _ in range(200):
        client = Redis.from_url(url)
        try:
            await client.ping()
            break
        except Exception:
            await asyncio.sleep(0.02)  # the server process is still starting: poll again
        finally:
            await client.aclose()
    try:
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=10)


async def _held(runtime: Runtime) -> int:
    async with runtime.db.read() as session:
        rows = await session.execute(select(Run.id).where(Run.reservation_state == RES_HELD))
        return len(rows.all())


@pytest.mark.parametrize("idempotency_key", [None, "run-now-1"])
async def test_rt26_rt27_with_redis_stopped_answers_launched_0_and_the_skipped_rows(
    runtime: Runtime,
    tenant: Tenant,
    clock: ManualClock,
    client: httpx.AsyncClient,
    own_redis: tuple[str, subprocess.Popen[bytes]],
    idempotency_key: str | None,
) -> None:
    url, redis_process = own_redis
    broker = ArqQueue(runtime.db, clock, url, f"rt-{uuid.uuid4().hex[:8]}")
    database_queue = runtime.queue
    runtime.queue = broker
    try:
        assert await broker.ping()  # connected while Redis runs ...
        redis_process.terminate()  # ... then the broker goes down
        redis_process.wait(timeout=10)
        await fund(runtime, tenant, 1000)
        headers = dict(auth(tenant))
        create_headers = dict(headers)
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
            create_headers["Idempotency-Key"] = f"create-{idempotency_key}"
        body = {
            "name": "Shoes",
            "data_type": "serp",
            "frequency": "weekly",
            "depth": "top10",
            "location_code": 2840,
            "language_code": "en",
            "domain": "acme-shop.com",
            "devices": ["desktop", "mobile"],
            "keywords": ["red shoes"],
        }
        created = await client.post(
            "/api/v1/ranktracking/schedules", json=body, headers=create_headers
        )
        assert created.status_code == 201, created.text
        baseline = created.json()["baseline"]
        assert baseline["launched"] == 0
        assert (baseline["reason"], baseline["code"]) == ("dispatch", "dispatch_failed")
        assert [r["status"] for r in baseline["runs"]] == ["skipped_dispatch"] * 2
        assert created.json()["schedule"]["next_run"] == "retrying"
        schedule_id = created.json()["schedule"]["id"]

        answer = await client.post(
            f"/api/v1/ranktracking/schedules/{schedule_id}/run",
            json={"queue": "priority"},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        out = answer.json()
        assert out["launched"] == 0
        assert (out["reason"], out["code"]) == ("dispatch", "dispatch_failed")
        assert [(r["status"], r["error_code"]) for r in out["runs"]] == [
            ("skipped_dispatch", "dispatch_failed")
        ] * 2
        assert await _held(runtime) == 0
        assert await available(runtime, tenant) == 1000
        if idempotency_key:
            # A retry replays what really happened, not what was planned before the hand-off.
            again = await client.post(
                f"/api/v1/ranktracking/schedules/{schedule_id}/run",
                json={"queue": "priority"},
                headers=headers,
            )
            assert again.headers.get("Idempotent-Replayed") == "true"
            assert again.json() == out
    finally:
        runtime.queue = database_queue
        await broker.aclose()


async def test_latest_results_skip_a_cancelled_run_and_keep_the_last_good_one(
    runtime: Runtime,
    tenant: Tenant,
    clock: ManualClock,
    client: httpx.AsyncClient,
    sim: object,
) -> None:
    from tests.engines.ranktracking.factories import collect, launch

    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant, devices=["desktop", "mobile"])
    for run_id in await launch(runtime, schedule.id):
        await collect(runtime, run_id)
    good = {r.id for r in await _runs(runtime, schedule.id)}
    clock.advance(hours=1)
    await launch(runtime, schedule.id)  # in flight when the schedule is paused
    paused = await client.post(
        f"/api/v1/ranktracking/schedules/{schedule.id}/pause", headers=auth(tenant)
    )
    assert paused.status_code == 200
    latest = await client.get(
        f"/api/v1/ranktracking/schedules/{schedule.id}/results", headers=auth(tenant)
    )
    assert latest.status_code == 200, latest.text
    rows = latest.json()
    assert {r["run_id"] for r in rows} == good
    assert {r["state"] for r in rows} == {"retrieved"}
    assert len(rows) == 4  # two keywords, two devices
