"""arq specifics: our stable job names, msgspec payloads in a msgpack envelope (never pickle)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from redis.asyncio import Redis

from app.scheduling.arq_queue import ArqQueue
from app.scheduling.arq_redis import JOB_EXPIRY, PRIORITY_BAND, Timing, publish_jobs
from tests.conftest import TEST_REDIS_URL
from tests.scheduling.conftest import Runtimes
from tests.scheduling.helpers import commands_seen
from tests.scheduling.testjobs import RECORD, RUNS, Work

pytestmark = pytest.mark.redis


async def test_jobs_are_stored_under_our_name_with_a_msgspec_payload_and_no_pickle(
    runtimes: Runtimes,
) -> None:
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    job_id = f"envelope:{id(RUNS):x}"
    await queue.enqueue(None, RECORD, Work(key="envelope", seconds=0.5), job_id=job_id)
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        raw = await client.get(f"arq:job:{queue.job_key(job_id)}")
        queued = await client.zrange(queue.queue_key("default"), 0, -1)
    finally:
        await client.aclose()
    assert raw is not None
    assert not raw.startswith(b"\x80"), "a pickle stream starts with the PROTO opcode"
    envelope = msgspec.msgpack.decode(raw)
    assert envelope["f"] == "test.record"
    (payload,) = envelope["a"]
    assert msgspec.json.decode(payload, type=Work) == Work(key="envelope", seconds=0.5)
    assert queued == [queue.job_key(job_id).encode()]


@pytest.mark.parametrize(
    "when",
    [
        Timing(),
        Timing(defer_by=timedelta(seconds=30)),
        Timing(defer_by=-PRIORITY_BAND * 3, expires=JOB_EXPIRY),
        Timing(defer_until=datetime(2100, 1, 1, tzinfo=UTC)),
    ],
)
async def test_a_batch_is_queued_as_arq_s_enqueue_job_would_queue_each_job(
    runtimes: Runtimes, when: Timing
) -> None:
    """Jobs are queued by one script each, pipelined: the same job key, envelope, score and
    expiry as arq's ``enqueue_job`` gives them, and a job whose id is queued or has a result is
    left alone, as there."""
    runtime = runtimes.make("arq")
    queue = runtime.queue
    assert isinstance(queue, ArqQueue)
    tag = uuid.uuid4().hex[:12]
    queue_name = queue.queue_key("default")
    client = Redis.from_url(TEST_REDIS_URL)
    pool = queue.client("default")
    try:
        await client.set(f"arq:result:kept-{tag}", b"done")  # a finished job's result
        await pool.enqueue_job(
            "test.record", b"{}", _job_id=f"arq-{tag}", _queue_name=queue_name,
            _defer_until=when.defer_until, _defer_by=when.defer_by, _expires=when.expires,
        )  # fmt: skip
        commands = asyncio.create_task(commands_seen(client, 0.5))
        await asyncio.sleep(0.1)
        jobs = [("test.record", b"{}", f"{name}-{tag}", queue_name) for name in ("ours", "kept")]
        await publish_jobs(pool, [*jobs, ("test.record", b"{}", f"arq-{tag}", queue_name)], when)
        seen = [c for c in await commands if tag in c]  # other tests share the server
        assert not [c for c in seen if c.startswith("WATCH")]
        assert len([c for c in seen if c.startswith("EVALSHA")]) == 3
        ours, arqs = f"arq:job:ours-{tag}", f"arq:job:arq-{tag}"
        assert await client.exists(f"arq:job:kept-{tag}") == 0
        mine = msgspec.msgpack.decode(await client.get(ours))
        theirs = msgspec.msgpack.decode(await client.get(arqs))
        assert abs(mine.pop("et") - theirs.pop("et")) < 5_000
        assert mine == theirs  # the envelope arq's worker reads
        score = await client.zscore(queue_name, f"ours-{tag}")
        arq_score = await client.zscore(queue_name, f"arq-{tag}")
        assert score is not None
        assert arq_score is not None
        assert abs(score - arq_score) < 5_000
        assert abs(await client.pttl(ours) - await client.pttl(arqs)) < 5_000
    finally:
        await client.delete(f"arq:result:kept-{tag}")
        await client.aclose()
        await pool.aclose()
