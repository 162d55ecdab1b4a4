"""arq specifics: our stable job names, msgspec payloads in a msgpack envelope (never pickle)."""

from __future__ import annotations

import msgspec
import pytest
from redis.asyncio import Redis

from app.scheduling.arq_queue import ArqQueue
from tests.conftest import TEST_REDIS_URL
from tests.scheduling.conftest import Runtimes
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
