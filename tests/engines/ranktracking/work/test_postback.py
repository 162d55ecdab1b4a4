"""Provider postbacks (spec §12): the simulator POSTs finished tasks, gzip-compressed, to the app
served on a loopback port; they go through the poller's own result path, so a postback and a poll
(or two postbacks) store each result once and settle the run once (RT-24, RT-38)."""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import func, select

from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.errors import PostbackUnreadable
from app.engines.ranktracking.models import SETTLEMENT, LedgerEntry, Result, Run
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.postback import inflate
from app.engines.ranktracking.work.postback_token import ROUTE_PREFIX, sign, workspace_secret
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.serp import SerpClient, SerpTask
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.serp import SerpSimulator
from app.settings import Settings
from tests.conftest import eventually
from tests.engines.ranktracking.factories import (
    DOMAIN,
    KEYWORD_DATA,
    available,
    fund,
    make_list,
    make_schedule,
)
from tests.factories import Tenant, create_tenant

_encoder = msgspec.json.Encoder(decimal_format="number")


@pytest.fixture
async def live_url(settings: Settings, runtime: Runtime) -> AsyncIterator[str]:
    """The app on a loopback port (the provider's postbacks reach it over real HTTP), with
    postbacks switched on and ``PUBLIC_URL`` pointing at it."""
    from app.web.app import create_app

    async with serve_in_loop(create_app(settings, runtime, background=False)) as url:
        runtime.settings = dataclasses.replace(
            runtime.settings,
            web=dataclasses.replace(runtime.settings.web, public_url=url),
            ranktracking=dataclasses.replace(runtime.settings.ranktracking, postbacks=True),
        )
        yield url


def _client(runtime: Runtime) -> SerpClient:
    client = RankTrackingDeps.of(runtime).serp
    assert isinstance(client, SerpClient)
    return client


async def _posted_run(runtime: Runtime, tenant: Tenant) -> int:
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    (run_id,) = launch.run_ids
    await post_impl(RankTrackingDeps.of(runtime), _client(runtime), run_id, final_attempt=False)
    return run_id


async def _run(runtime: Runtime, run_id: int) -> Run:
    async with runtime.db.read() as session:
        run = await session.get(Run, run_id, populate_existing=True)
        assert run is not None
        return run


async def _results(runtime: Runtime, run_id: int) -> dict[str, Result]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Result).where(Result.run_id == run_id))).scalars()
        return {r.keyword: r for r in rows}


async def _settlements(runtime: Runtime, run_id: int) -> int:
    async with runtime.db.read() as session:
        return int(
            await session.scalar(
                select(func.count())
                .select_from(LedgerEntry)
                .where(LedgerEntry.run_id == run_id, LedgerEntry.kind == SETTLEMENT)
            )
            or 0
        )


async def _token(runtime: Runtime, tenant: Tenant, run_id: int) -> str:
    async with runtime.db.read() as session:
        secret = await workspace_secret(session, runtime.secrets, tenant.workspace_id)
    assert secret is not None
    return sign(secret, run_id)


def _task_body(sim: SerpSimulator, task_id: str) -> bytes:
    """The postback the provider sends for a finished task: its ``task_get`` envelope, gzipped."""
    envelope, _ = sim.task_get("serp", task_id)
    return gzip.compress(_encoder.encode(envelope))


async def _send(url: str, token: str, body: bytes, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{url}{ROUTE_PREFIX}{token}",
            content=body,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip", **headers},
        )


async def test_postbacks_store_results_and_settle_once(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, live_url: str
) -> None:
    """§12 postback route, RT-24/RT-38: the provider's postbacks end the run without a poll; a
    later poll and a repeated postback change nothing and the reservation settles once."""
    sim.ready_after_polls = 1
    sim.place("red shoes", DOMAIN, 3)
    run_id = await _posted_run(runtime, tenant)
    results = await _results(runtime, run_id)
    task = sim.task(results["red shoes"].task_id or "")
    assert task is not None
    assert str(task["postback_url"]).startswith(f"{live_url}{ROUTE_PREFIX}{run_id}.")
    assert (await _run(runtime, run_id)).status == "running"

    await _client(runtime).serp_tasks_ready()  # time passes at the provider: both tasks finish

    async def ended() -> bool:
        return (await _run(runtime, run_id)).status == "succeeded"

    await eventually(ended)
    assert [outcome for _, outcome in sim.deliveries] == [200, 200]
    results = await _results(runtime, run_id)
    assert results["red shoes"].position == 3
    assert results["blue shoes"].state == "retrieved"
    assert await _settlements(runtime, run_id) == 1
    balance = await available(runtime, tenant)
    fetched = {k: r.fetched_at for k, r in results.items()}

    # The fallback poll and a repeated postback find nothing left to do.
    await poll_ready(RankTrackingDeps.of(runtime), _client(runtime))
    token = await _token(runtime, tenant, run_id)
    again = await _send(live_url, token, _task_body(sim, results["red shoes"].task_id or ""))
    assert again.status_code == 200
    assert again.json() == {"run_id": run_id, "tasks": 1, "stored": 0}
    assert await _settlements(runtime, run_id) == 1
    assert await available(runtime, tenant) == balance
    assert {k: r.fetched_at for k, r in (await _results(runtime, run_id)).items()} == fetched
    run = await _run(runtime, run_id)
    assert (run.status, run.retrieved, run.polls) == ("succeeded", 2, 0)


async def test_postback_and_poll_share_one_run(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, live_url: str
) -> None:
    """§12: one keyword arrives by postback while the other is still queued; the poll and the
    second postback race for it and the run still ends once, each result stored once."""
    sim.ready_after_polls = 1
    sim.script("blue shoes", queue_polls=2)
    run_id = await _posted_run(runtime, tenant)
    await _client(runtime).serp_tasks_ready()

    async def red_stored() -> bool:
        return (await _results(runtime, run_id))["red shoes"].state == "retrieved"

    await eventually(red_stored)
    run = await _run(runtime, run_id)
    assert (run.status, run.retrieved) == ("running", 1)
    assert await _settlements(runtime, run_id) == 0

    # This poll makes the provider finish "blue shoes" (sending its postback) and fetches it.
    await poll_ready(RankTrackingDeps.of(runtime), _client(runtime))

    async def settled() -> bool:
        return (await _run(runtime, run_id)).status == "succeeded" and len(sim.deliveries) == 2

    await eventually(settled)
    assert await _settlements(runtime, run_id) == 1
    results = await _results(runtime, run_id)
    assert {r.state for r in results.values()} == {"retrieved"}


async def test_bad_tokens_answer_401_and_store_nothing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, client: httpx.AsyncClient
) -> None:
    """§12: the token authenticates the child run; a forged, moved or foreign one answers 401."""
    run_id = await _posted_run(runtime, tenant)
    task_id = (await _results(runtime, run_id))["red shoes"].task_id or ""
    await _client(runtime).serp_tasks_ready()
    body = _task_body(sim, task_id)
    good = await _token(runtime, tenant, run_id)
    other = await create_tenant(runtime, name="Other")
    foreign = await _token(runtime, other, run_id)
    for token in (
        f"{run_id}.{'A' * 43}",  # forged signature
        f"{run_id + 1}.{good.partition('.')[2]}",  # another run's id with this signature
        foreign,  # signed with another workspace's secret
        "not-a-token",
        f"{10**30}.abc",
    ):
        response = await client.post(
            f"{ROUTE_PREFIX}{token}", content=body, headers={"Content-Encoding": "gzip"}
        )
        assert response.status_code == 401, token
        assert response.json()["code"] == "postback_unauthorized"
    assert {r.state for r in (await _results(runtime, run_id)).values()} == {"pending"}
    assert (await _run(runtime, run_id)).status == "running"


async def test_unreadable_postbacks_answer_400_and_store_nothing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, client: httpx.AsyncClient
) -> None:
    """§12: garbage (not gzip, not JSON, not the shape, another run's task, a decompression
    bomb) answers 400 in the project's error format; nothing is stored."""
    run_id = await _posted_run(runtime, tenant)
    task_id = (await _results(runtime, run_id))["red shoes"].task_id or ""
    await _client(runtime).serp_tasks_ready()
    token = await _token(runtime, tenant, run_id)
    envelope: dict[str, Any] = sim.task_get("serp", task_id)[0]
    moved = msgspec.json.decode(_encoder.encode(envelope))
    moved["tasks"][0]["data"]["tag"] = str(run_id + 1)
    bodies = [
        (b"\x1f\x8b not really gzip", "gzip"),
        (gzip.compress(b"{not json"), "gzip"),
        (gzip.compress(b'{"status_code": 20000, "tasks": [{"id": 5}]}'), "gzip"),
        (gzip.compress(b'{"status_code": 20000, "tasks": []}'), "gzip"),
        (gzip.compress(_encoder.encode(moved)), "gzip"),
        (gzip.compress(_encoder.encode(envelope))[:-12], "gzip"),  # truncated
        (gzip.compress(b" " * 9_000_000), "gzip"),  # 9 MB of spaces in ~9 KB
        (_encoder.encode(envelope), "br"),
    ]
    for body, encoding in bodies:
        response = await client.post(
            f"{ROUTE_PREFIX}{token}", content=body, headers={"Content-Encoding": encoding}
        )
        assert response.status_code == 400, (body[:40], response.text)
        assert response.json()["code"] == "postback_unreadable"
    assert {r.state for r in (await _results(runtime, run_id)).values()} == {"pending"}
    # The same result, sent plainly (no compression), is accepted.
    plain = await client.post(f"{ROUTE_PREFIX}{token}", content=_encoder.encode(envelope))
    assert plain.status_code == 200
    assert plain.json()["stored"] == 1


async def test_postback_before_the_post_is_recorded_stores_nothing(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, client: httpx.AsyncClient
) -> None:
    """A postback racing ahead of the worker's own record of the post (run still dispatching)
    is acknowledged without effect; the poll that follows every post collects the task."""
    await fund(runtime, tenant, 1000)
    schedule = await make_schedule(runtime, tenant)
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    (run_id,) = launch.run_ids
    # The task exists at the provider before the worker has recorded it.
    posted = await _client(runtime).post_serp_tasks(
        [SerpTask(tag=str(run_id), keyword="red shoes", location_code=2840, language_code="en")]
    )
    token = await _token(runtime, tenant, run_id)
    response = await client.post(
        f"{ROUTE_PREFIX}{token}",
        content=_task_body(sim, posted[0].task_id),
        headers={"Content-Encoding": "gzip"},
    )
    assert response.status_code == 200
    assert response.json()["stored"] == 0
    assert (await _run(runtime, run_id)).status == "dispatching"


async def test_no_postback_address_unless_enabled(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    """``RT_POSTBACKS`` is off by default: tasks are posted without a postback address."""
    assert runtime.settings.ranktracking.postbacks is False
    run_id = await _posted_run(runtime, tenant)
    for result in (await _results(runtime, run_id)).values():
        task = sim.task(result.task_id or "")
        assert task is not None
        assert "postback_url" not in task


def test_inflate_limits_the_decompressed_size() -> None:
    assert inflate(gzip.compress(b"x" * 100), "gzip", limit=100) == b"x" * 100
    with pytest.raises(PostbackUnreadable):
        inflate(gzip.compress(b"x" * 101), "gzip", limit=100)
    with pytest.raises(PostbackUnreadable):
        inflate(b"y" * 101, None, limit=100)


async def test_keyword_data_postback_applies_every_keyword_of_the_task(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, live_url: str
) -> None:
    """§12: a keyword-data task (many keywords, one task) posted back ends its run like a poll
    would: volumes stored, the explicit no-data row kept apart."""
    sim.ready_after_polls = 1
    sim.script("quiet term", no_data=True)
    await fund(runtime, tenant, 1000)
    kl = await make_list(runtime, tenant, ["busy term", "quiet term"])
    schedule = await make_schedule(
        runtime,
        tenant,
        list_id=kl.id,
        **KEYWORD_DATA,
    )
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    (run_id,) = launch.run_ids
    await post_impl(RankTrackingDeps.of(runtime), _client(runtime), run_id, final_attempt=False)
    await _client(runtime).keyword_data_tasks_ready()

    async def ended() -> bool:
        return (await _run(runtime, run_id)).status == "succeeded"

    await eventually(ended)
    results = await _results(runtime, run_id)
    assert results["busy term"].state == "retrieved"
    assert (results["busy term"].data or {})["search_volume"] > 0
    assert results["quiet term"].state == "no_data"
    assert await _settlements(runtime, run_id) == 1
