"""Pacing provider calls under the account's general limit (RT-51): no 60-second window ever
holds more calls than the limit, in one process and across processes sharing Redis."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import UTC, datetime

import pytest

from app.clock import ManualClock
from app.integrations.serp.pacing import (
    LocalTokenBucket,
    RedisTokenBucket,
    Unpaced,
    bucket_shape,
    provider_pacer,
)


def _most_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best = start = 0
    for end, moment in enumerate(times):
        while moment - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def test_rt51_bucket_shape_never_exceeds_the_limit_in_a_minute() -> None:
    """RT-51: capacity + one minute of refill is the limit less 1% of headroom."""
    for limit in (1, 2, 59, 60, 120, 2000, 10_000):
        capacity, rate = bucket_shape(limit)
        assert capacity >= 1
        assert capacity + rate * 60 <= limit - limit // 100 + 1e-9 or limit < 2
    with pytest.raises(ValueError, match="at least 1"):
        bucket_shape(0)


async def test_rt51_local_bucket_paces_concurrent_callers_under_the_limit() -> None:
    """RT-51: 5,000 concurrent calls through an in-process bucket of 2,000 a minute, on a manual
    clock moved by the waits: never more than 2,000 in any 60 s, and no slower than the limit
    requires."""
    clock = ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))

    stamps: list[float] = []
    waits: list[float] = []

    async def timed_sleep(seconds: float) -> None:
        # Virtual time: a waiter moves the clock to the end of its own wait (never back).
        waits.append(seconds)
        target = clock.monotonic() + seconds
        # Callers wake in reservation order; the clock only moves forward.
        if target > clock.monotonic():
            clock.advance(seconds=target - clock.monotonic())
        await asyncio.sleep(0)

    bucket = LocalTokenBucket(2000, clock, sleep=timed_sleep)
    start = clock.monotonic()

    async def call() -> None:
        await bucket.acquire()
        stamps.append(clock.monotonic())

    await asyncio.gather(*(call() for _ in range(5000)))
    assert len(stamps) == 5000
    # Slots were handed out in order; each call happened at its slot's time or later.
    assert _most_in_window(stamps, 60.0) <= 2000
    elapsed = max(stamps) - start
    capacity, rate = bucket_shape(2000)
    assert elapsed == pytest.approx((5000 - capacity) / rate, rel=0.01)


async def test_rt51_unpaced_and_provider_pacer_choice() -> None:
    clock = ManualClock()
    assert isinstance(provider_pacer(0, clock), Unpaced)
    assert isinstance(provider_pacer(100, clock), LocalTokenBucket)
    shared = provider_pacer(100, clock, redis_url="redis://127.0.0.1:1/0", timeout_seconds=0.2)
    assert isinstance(shared, RedisTokenBucket)
    # Redis unreachable: the process paces itself instead of failing the provider call.
    await shared.acquire()
    await shared.aclose()


_WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from app.clock import SystemClock
    from app.integrations.serp.pacing import RedisTokenBucket

    async def main() -> None:
        url, key, limit, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        bucket = RedisTokenBucket(url, limit, SystemClock(), key=key)
        stamps = []
        for _ in range(calls):
            await bucket.acquire()
            stamps.append(time.time())
        await bucket.aclose()
        print(json.dumps(stamps))

    asyncio.run(main())
    """
)


@pytest.mark.redis
def test_rt51_processes_share_one_bucket_through_redis(redis_url: str) -> None:
    """RT-51: three worker processes pacing through one Redis bucket (its Lua script on Redis
    TIME) together stay within the shared limit: at 600 a minute (594 after the 1% headroom: 9 at
    once, then 9.75 a second), 60 calls from three processes take about (60 − 9) / 9.75 ≈ 5.2 s,
    and no window of T seconds holds more than 9 + 9.75 × T of them."""
    key = f"test:pacing:{uuid.uuid4().hex}"
    limit, per_process, processes = 600, 20, 3
    started = time.time()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, redis_url, key, str(limit), str(per_process)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    stamps: list[float] = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        stamps += json.loads(out)
    assert len(stamps) == per_process * processes
    capacity, rate = bucket_shape(limit)
    stamps.sort()
    # Calls of different processes interleave: the bucket is shared, not one per process.
    assert stamps[-1] - stamps[0] >= (len(stamps) - capacity) / rate - 0.5
    assert stamps[0] >= started
    for i in range(len(stamps)):
        for j in range(i, len(stamps)):
            # Small slack for the gap between taking a slot and reading the process clock.
            assert j - i + 1 <= capacity + rate * (stamps[j] - stamps[i]) + 2
