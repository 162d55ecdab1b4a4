"""The SERP provider simulator itself: deterministic from its seed, per device and context,
programmable placements, postbacks and pingbacks, a finite account balance, and the threaded server
the demo uses (spec §12)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar, Request, get, post

from app.integrations.serp import (
    KeywordDataTask,
    PaymentRequired,
    SerpClient,
    SerpTask,
    SerpTaskResult,
)
from app.sandbox.base import serve_in_loop, simulator_in_loop
from app.sandbox.serp import SerpSimulator, start_serp_sandbox
from tests.conftest import eventually

LOGIN, PASSWORD = "sandbox", "sandbox-password"


def task(tag: str, keyword: str, **kwargs: Any) -> SerpTask:
    fields: dict[str, Any] = {"location_code": 2840, "language_code": "en", "depth": 100}
    fields.update(kwargs)
    return SerpTask(tag=tag, keyword=keyword, **fields)


async def fetch(sim: SerpSimulator, tasks: list[SerpTask]) -> list[SerpTaskResult]:
    async with simulator_in_loop(sim) as url:
        client = SerpClient(url, LOGIN, PASSWORD)
        posted = await client.post_serp_tasks(tasks)
        results = [await client.get_serp_task(p.task_id) for p in posted]
        await client.aclose()
    return results


def organic(result: SerpTaskResult) -> list[str | None]:
    return [i.url for i in result.items if i.type == "organic"]


async def test_rankings_are_deterministic_per_seed_and_context() -> None:
    """The same seed gives the same 100 results for a keyword, device and location; another seed,
    device or location gives another ranking."""
    sim_a, sim_b, other_seed = SerpSimulator(seed=5), SerpSimulator(seed=5), SerpSimulator(seed=6)
    desktop = sim_a.ranking("red shoes", "desktop", 2840, "en")
    assert len(desktop) == 100
    assert len(set(desktop)) == 100
    assert desktop == sim_b.ranking("red shoes", "desktop", 2840, "en")
    assert desktop == sim_a.ranking("  Red   SHOES ", "desktop", 2840, "en")
    assert desktop != other_seed.ranking("red shoes", "desktop", 2840, "en")
    assert desktop != sim_a.ranking("red shoes", "mobile", 2840, "en")
    assert desktop != sim_a.ranking("red shoes", "desktop", 2250, "en")

    [first] = await fetch(sim_a, [task("a", "red shoes")])
    [second] = await fetch(sim_b, [task("b", "red shoes")])
    assert first.items == second.items
    assert organic(first) == [f"https://{d}/red-shoes" for d in desktop]


async def test_placement_per_device() -> None:
    sim = SerpSimulator(seed=3)
    sim.place("red shoes", "shop.example", 2, device="mobile")
    sim.place("red shoes", "shop.example", 8, device="desktop")
    sim.place("red shoes", "gone.example", None)
    assert sim.ranking("red shoes", "mobile", 2840, "en")[1] == "shop.example"
    assert sim.ranking("red shoes", "desktop", 2840, "en")[7] == "shop.example"
    desktop, mobile = await fetch(
        sim, [task("d", "red shoes", device="desktop"), task("m", "red shoes", device="mobile")]
    )
    assert desktop.find("shop.example").rank_group == 8  # type: ignore[union-attr]
    assert mobile.find("shop.example").rank_group == 2  # type: ignore[union-attr]
    assert desktop.find("gone.example") is None
    with pytest.raises(ValueError, match="position"):
        sim.place("red shoes", "x.example", 101)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[tuple[str, Any]]]]:
    """A loopback endpoint recording the postbacks (gzip JSON) and pingbacks it receives."""
    received: list[tuple[str, Any]] = []

    @post("/postback", status_code=200)
    async def postback(request: Request[Any, Any, Any]) -> None:
        assert request.headers.get("content-encoding") == "gzip"
        received.append(("post", msgspec.json.decode(gzip.decompress(await request.body()))))

    @get("/pingback")
    async def pingback(request: Request[Any, Any, Any]) -> None:
        received.append(("ping", dict(request.query_params)))

    async with serve_in_loop(Litestar([postback, pingback])) as url:
        yield url, received


async def test_postback_and_pingback_are_sent_when_the_task_is_ready(
    receiver: tuple[str, list[tuple[str, Any]]],
) -> None:
    """postback_url receives the finished task in the task_get shape; pingback_url is called with
    $id and $tag substituted. A queued task notifies only once it becomes ready."""
    url, received = receiver
    sim = SerpSimulator(seed=1)
    sim.script("queued words", queue_polls=1)
    async with simulator_in_loop(sim) as sim_url:
        client = SerpClient(sim_url, LOGIN, PASSWORD)
        now, later = await client.post_serp_tasks(
            [
                task("run-5", "red shoes", postback_url=f"{url}/postback"),
                task("run-6", "queued words", pingback_url=f"{url}/pingback?id=$id&tag=$tag"),
            ]
        )

        async def delivered(count: int) -> bool:
            return len(sim.deliveries) >= count

        await eventually(lambda: delivered(1))
        [(kind, envelope)] = received
        assert kind == "post"
        assert envelope["tasks"][0]["id"] == now.task_id
        assert envelope["tasks"][0]["data"]["tag"] == "run-5"
        assert envelope["tasks"][0]["result"][0]["items"]

        assert (await client.get_serp_task(later.task_id)).state == "in_queue"
        await eventually(lambda: delivered(2))
        assert received[1] == ("ping", {"id": later.task_id, "tag": "run-6"})
        assert [outcome for _, outcome in sim.deliveries] == [200, 200]
        await client.aclose()


async def test_a_finite_balance_answers_payment_required() -> None:
    sim = SerpSimulator(seed=1, funds=Decimal("0.001"))
    async with simulator_in_loop(sim) as url:
        client = SerpClient(url, LOGIN, PASSWORD)
        [posted] = await client.post_serp_tasks([task("a", "k", depth=10)])
        assert posted.cost == Decimal("0.0006")
        with pytest.raises(PaymentRequired):
            await client.post_serp_tasks([task("b", "k", depth=10)])
        await client.aclose()
    assert sim.funds == Decimal("0.0004")
    assert sim.tasks_posted == 1
    assert sim.total_cost == Decimal("0.0006")


async def test_invalid_keyword_data_tasks_are_refused_per_task() -> None:
    sim = SerpSimulator(seed=1)
    async with simulator_in_loop(sim) as url:
        client = SerpClient(url, LOGIN, PASSWORD)
        bad_language, empty, fine = await client.post_keyword_data_tasks(
            [
                KeywordDataTask(tag="x", keywords=["a"], location_code=2840, language_code="xx"),
                KeywordDataTask(tag="y", keywords=[], location_code=2840, language_code="en"),
                KeywordDataTask(tag="z", keywords=["a"], location_code=2840, language_code="en"),
            ]
        )
        await client.aclose()
    assert bad_language.status_code == 40501
    assert "language_code" in bad_language.status_message
    assert empty.status_code == 40501
    assert "keywords" in empty.status_message
    assert fine.created
    assert sim.total_cost == Decimal("0.05")


async def test_an_unreadable_body_is_answered_in_the_envelope() -> None:
    sim = SerpSimulator(seed=1)
    async with (
        simulator_in_loop(sim) as url,
        httpx.AsyncClient(auth=(LOGIN, PASSWORD)) as http,
    ):
        response = await http.post(f"{url}/v3/serp/google/organic/task_post", content=b"{not json")
    assert response.status_code == 200
    assert response.json()["status_code"] == 40501
    assert sim.state.count("serp.task_post") == 1


def test_the_threaded_sandbox_serves_the_demo() -> None:
    sim = SerpSimulator(seed=2)
    server = start_serp_sandbox(sim)
    try:
        response = httpx.get(
            f"{server.url}/v3/serp/google/organic/tasks_ready", auth=(LOGIN, PASSWORD)
        )
    finally:
        server.stop()
    assert response.json()["status_code"] == 20000
    assert sim.state.count("serp.tasks_ready") == 1
