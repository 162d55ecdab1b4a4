"""The SERP provider client against the loopback simulator: every method, chunking, depth, queueing,
no-data and partial answers (spec §12, RT-14, RT-34, RT-37)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal

import pytest

from app.integrations.serp import (
    MAX_TASKS_PER_POST,
    KeywordDataTask,
    PaymentRequired,
    SerpClient,
    SerpTask,
)
from app.sandbox.base import simulator_in_loop
from app.sandbox.serp import SerpSimulator

LOGIN, PASSWORD = "sandbox", "sandbox-password"
US, EN = 2840, "en"


@dataclass
class Provider:
    sim: SerpSimulator
    client: SerpClient
    url: str


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    sim = SerpSimulator(seed=42)
    async with simulator_in_loop(sim) as url:
        client = SerpClient(url, LOGIN, PASSWORD, timeout_seconds=5.0)
        yield Provider(sim, client, url)
        await client.aclose()


def serp_task(
    tag: str,
    keyword: str,
    *,
    depth: int = 10,
    location_code: int = US,
    device: str = "desktop",
    priority: int = 1,
) -> SerpTask:
    return SerpTask(
        tag=tag,
        keyword=keyword,
        location_code=location_code,
        language_code=EN,
        device=device,
        depth=depth,
        priority=priority,
    )


async def test_post_get_and_ready_round_trip_echoes_the_tag(provider: Provider) -> None:
    """§12: task_post → tasks_ready → task_get/regular/{id}; the child run id comes back in tag."""
    posted = await provider.client.post_serp_tasks([serp_task("run-17", "trail running shoes")])
    assert len(posted) == 1
    assert posted[0].created
    assert posted[0].task_id
    assert posted[0].tag == "run-17"
    stored = provider.sim.task(posted[0].task_id)
    assert stored is not None
    assert stored["keyword"] == "trail running shoes"

    ready = await provider.client.serp_tasks_ready()
    assert [(r.task_id, r.tag) for r in ready] == [(posted[0].task_id, "run-17")]

    result = await provider.client.get_serp_task(posted[0].task_id)
    assert result.state == "ok"
    assert result.status_code == 20000
    assert result.tag == "run-17"
    assert result.keyword == "trail running shoes"
    organic = [i for i in result.items if i.type == "organic"]
    assert [i.rank_group for i in organic] == list(range(1, 11))
    assert [i.rank_absolute for i in result.items] == list(range(1, len(result.items) + 1))
    assert all(i.domain and i.url and i.title for i in organic)
    assert "organic" in result.item_types

    # Collected tasks leave tasks_ready; they stay readable by id.
    assert await provider.client.serp_tasks_ready() == []
    again = await provider.client.get_serp_task(posted[0].task_id)
    assert again.items == result.items
    assert provider.sim.state.count("serp.task_post") == 1
    assert provider.sim.state.count("serp.tasks_ready") == 2
    assert provider.sim.state.count("serp.task_get") == 2


async def test_250_tasks_are_posted_in_three_calls_in_order(provider: Provider) -> None:
    """§12: at most 100 tasks per task_post call; 250 tasks → 100 + 100 + 50."""
    tasks = [serp_task(f"t{n}", f"keyword {n}") for n in range(250)]
    posted = await provider.client.post_serp_tasks(tasks)
    assert provider.sim.state.count("serp.task_post") == 3
    assert [p.tag for p in posted] == [f"t{n}" for n in range(250)]
    assert all(p.created for p in posted)
    assert len({p.task_id for p in posted}) == 250
    assert provider.sim.tasks_posted == 250
    assert [kind for kind, _ in provider.sim.state.log].count("serp.task_post") == 3
    assert MAX_TASKS_PER_POST == 100


async def test_position_found_within_depth_and_absent_beyond_it(provider: Provider) -> None:
    """RT-14: a domain ranked 37th is absent from a top-10 check (not a 0, not an error) and found
    at 37 in a top-100 check; a domain outside the top 100 is absent at depth 100 too."""
    provider.sim.place("garden hoses", "acme.example", 37)
    provider.sim.place("garden hoses", "nowhere.example", None)
    provider.sim.place("garden tools", "acme.example", 4)
    posted = await provider.client.post_serp_tasks(
        [
            serp_task("top10", "garden hoses", depth=10),
            serp_task("top100", "garden hoses", depth=100),
            serp_task("tools", "garden tools", depth=10),
        ]
    )
    top10, top100, tools = [await provider.client.get_serp_task(p.task_id) for p in posted]

    assert top10.state == "ok"
    assert top10.find("acme.example") is None
    assert max(i.rank_group for i in top10.items if i.type == "organic") == 10

    found = top100.find("acme.example")
    assert found is not None
    assert found.rank_group == 37
    assert found.type == "organic"
    assert len([i for i in top100.items if i.type == "organic"]) == 100
    assert top100.find("nowhere.example") is None

    hit = tools.find("www.acme.example")
    assert hit is not None
    assert hit.rank_group == 4


async def test_in_queue_is_answered_then_ok_on_the_next_poll(provider: Provider) -> None:
    """RT-34 / §12: 40602 "still in queue" is a state to poll again, never a missing result."""
    provider.sim.script("slow keyword", queue_polls=1)
    [posted] = await provider.client.post_serp_tasks([serp_task("run-1", "slow keyword")])

    first = await provider.client.get_serp_task(posted.task_id)
    assert first.state == "in_queue"
    assert first.status_code == 40602
    assert first.items == []
    assert first.tag == "run-1"

    second = await provider.client.get_serp_task(posted.task_id)
    assert second.state == "ok"
    assert second.items


async def test_handed_and_queued_tasks_are_not_ready_until_polled_enough(
    provider: Provider,
) -> None:
    """40601 "task handed" reads as in queue too; tasks_ready lists a task only once it is done."""
    provider.sim.script("handed keyword", queue_polls=2, queue_code=40601)
    [posted] = await provider.client.post_serp_tasks([serp_task("run-2", "handed keyword")])

    assert await provider.client.serp_tasks_ready() == []  # poll 1
    handed = await provider.client.get_serp_task(posted.task_id)  # poll 2
    assert handed.state == "in_queue"
    assert handed.status_code == 40601
    assert [r.tag for r in await provider.client.serp_tasks_ready()] == ["run-2"]
    assert (await provider.client.get_serp_task(posted.task_id)).state == "ok"


async def test_no_results_is_an_explicit_answer(provider: Provider) -> None:
    """RT-34: 40102 "no search results" is the provider's explicit no-data, distinct from error."""
    provider.sim.script("zxqv nothing", no_data=True)
    [posted] = await provider.client.post_serp_tasks([serp_task("run-3", "zxqv nothing")])
    result = await provider.client.get_serp_task(posted.task_id)
    assert result.state == "no_results"
    assert result.status_code == 40102
    assert result.items == []
    assert result.find("acme.example") is None
    assert not result.retryable


async def test_partial_page_comes_back_ok_with_fewer_results(provider: Provider) -> None:
    """§12: a partial result is results, fewer than the depth asked for."""
    provider.sim.script("short page", partial_items=4)
    [posted] = await provider.client.post_serp_tasks([serp_task("run-4", "short page", depth=100)])
    result = await provider.client.get_serp_task(posted.task_id)
    assert result.state == "ok"
    assert [i.rank_group for i in result.items if i.type == "organic"] == [1, 2, 3, 4]


async def test_task_errors_are_reported_per_task(provider: Provider) -> None:
    """A refused task (40501) has no id and costs nothing; a task failing at the provider
    (50000) is an "error" state that may be retried, the others in the call are unaffected."""
    provider.sim.script("broken keyword", task_error=50000)
    posted = await provider.client.post_serp_tasks(
        [
            serp_task("bad-location", "shoes", location_code=0),
            serp_task("bad-device", "shoes", device="tablet"),
            serp_task("fails", "broken keyword"),
            serp_task("fine", "shoes"),
        ]
    )
    bad_location, bad_device, fails, fine = posted
    for refused in (bad_location, bad_device):
        assert not refused.created
        assert refused.status_code == 40501
        assert refused.task_id == ""
        assert refused.cost == 0
    assert "location_code" in bad_location.status_message
    assert "device" in bad_device.status_message

    failed = await provider.client.get_serp_task(fails.task_id)
    assert failed.state == "error"
    assert failed.status_code == 50000
    assert failed.retryable
    assert (await provider.client.get_serp_task(fine.task_id)).state == "ok"


async def test_unknown_task_id_is_an_error_state(provider: Provider) -> None:
    result = await provider.client.get_serp_task("00000000-0000-0000-0000-000000000000")
    assert result.state == "error"
    assert result.status_code == 40400


async def test_cost_per_task_depends_on_depth_and_priority(provider: Provider) -> None:
    """RT-37: the provider's own cost (USD) is reported per task for reconciliation."""
    posted = await provider.client.post_serp_tasks(
        [
            serp_task("a", "k", depth=10),
            serp_task("b", "k", depth=100),
            serp_task("c", "k", depth=10, priority=2),
            serp_task("d", "k", depth=100, priority=2),
        ]
    )
    assert [p.cost for p in posted] == [
        Decimal("0.0006"),
        Decimal("0.00465"),
        Decimal("0.0012"),
        Decimal("0.0093"),
    ]
    assert provider.sim.total_cost == sum((p.cost for p in posted), Decimal(0))
    result = await provider.client.get_serp_task(posted[1].task_id)
    assert result.cost == Decimal("0.00465")


async def test_payment_required_mid_way_keeps_the_tasks_already_created(
    provider: Provider,
) -> None:
    """A later chunk refused with 40200 raises PaymentRequired carrying the created chunk."""
    provider.sim.funds = Decimal("0.06")  # 100 top-10 tasks cost exactly 0.06
    tasks = [serp_task(f"t{n}", f"kw {n}") for n in range(150)]
    with pytest.raises(PaymentRequired) as caught:
        await provider.client.post_serp_tasks(tasks)
    assert caught.value.status_code == 40200
    assert not caught.value.transient
    assert [p.tag for p in caught.value.posted] == [f"t{n}" for n in range(100)]
    assert provider.sim.tasks_posted == 100
    assert provider.sim.state.count("serp.task_post") == 2


async def test_keyword_data_round_trip(provider: Provider) -> None:
    """§12 keyword data: volume, competition, CPC and monthly searches per keyword; a null volume
    is an explicit no-data row (RT-34); a keyword left out is a partial answer."""
    provider.sim.script("obscure phrase", no_data=True)
    provider.sim.script("dropped phrase", omit=True)
    [posted] = await provider.client.post_keyword_data_tasks(
        [
            KeywordDataTask(
                tag="kd-9",
                keywords=["garden hoses", "obscure phrase", "dropped phrase"],
                location_code=US,
                language_code=EN,
            )
        ]
    )
    assert posted.created
    assert posted.cost == Decimal("0.05")
    assert [(r.task_id, r.tag) for r in await provider.client.keyword_data_tasks_ready()] == [
        (posted.task_id, "kd-9")
    ]
    result = await provider.client.get_keyword_data_task(posted.task_id)
    assert result.state == "ok"
    assert result.tag == "kd-9"
    rows = {r.keyword: r for r in result.rows}
    assert set(rows) == {"garden hoses", "obscure phrase"}

    hoses = rows["garden hoses"]
    assert hoses.has_data
    assert hoses.search_volume is not None
    assert hoses.search_volume > 0
    assert isinstance(hoses.cpc, Decimal)
    assert hoses.competition in {"LOW", "MEDIUM", "HIGH"}
    assert len(hoses.monthly_searches) == 12

    obscure = rows["obscure phrase"]
    assert not obscure.has_data
    assert obscure.search_volume is None
    assert obscure.cpc is None
    assert obscure.competition is None
    assert obscure.monthly_searches == []
    assert await provider.client.keyword_data_tasks_ready() == []


async def test_keyword_data_in_queue_and_errors(provider: Provider) -> None:
    provider.sim.script("queued phrase", queue_polls=1)
    provider.sim.script("failing phrase", task_error=50000)
    queued, failing = await provider.client.post_keyword_data_tasks(
        [
            KeywordDataTask(
                tag="q", keywords=["queued phrase"], location_code=US, language_code=EN
            ),
            KeywordDataTask(
                tag="f", keywords=["failing phrase"], location_code=US, language_code=EN
            ),
        ]
    )
    first = await provider.client.get_keyword_data_task(queued.task_id)
    assert first.state == "in_queue"
    assert first.rows == []
    assert (await provider.client.get_keyword_data_task(queued.task_id)).state == "ok"
    failed = await provider.client.get_keyword_data_task(failing.task_id)
    assert failed.state == "error"
    assert failed.retryable


async def test_keyword_data_task_over_1000_keywords_is_refused_before_any_call(
    provider: Provider,
) -> None:
    too_many = KeywordDataTask(
        tag="x", keywords=[f"k{n}" for n in range(1001)], location_code=US, language_code=EN
    )
    with pytest.raises(ValueError, match="1000"):
        await provider.client.post_keyword_data_tasks([too_many])
    assert provider.sim.state.count() == 0
