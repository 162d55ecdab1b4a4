"""AR-19: the dispatcher cannot change an ad. Checked on the real import graph (the same check the
import-linter contract in ``pyproject.toml`` runs in CI), and on the read client's surface."""

from __future__ import annotations

import inspect

import grimp
import pytest

from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import BatchGet, MetaReader
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.factories import TOKEN

CLAIM_STAGE = "app.engines.adrules.claim"
DISPATCH_SIDE = [
    "app.engines.adrules.claim.dispatch",
    "app.engines.adrules.claim.due_rules",
    "app.engines.adrules.claim.fetch",
    "app.engines.adrules.claim.prefilters",
    "app.engines.adrules.claim.sweep",
    "app.engines.adrules.due",
]
WRITE_SIDE = [
    "app.integrations.meta.writer",
    "app.engines.adrules.work.execute",
    "app.engines.adrules.work.account",
    "app.engines.adrules.jobs",
]


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    return grimp.build_graph("app")


@pytest.mark.parametrize("source", DISPATCH_SIDE)
def test_ar19_dispatch_modules_cannot_reach_the_write_client(
    import_graph: grimp.ImportGraph, source: str
) -> None:
    for forbidden in WRITE_SIDE:
        if forbidden in import_graph.modules:
            chain = import_graph.find_shortest_chain(importer=source, imported=forbidden)
            assert chain is None, f"{source} reaches {forbidden} via {chain}"


READ_METHODS = {"ad_accounts", "batch", "campaign", "campaigns_page", "get_next", "insights"}


def test_ar19_the_reader_offers_reads_only() -> None:
    """The read client's whole surface: a new method is a new way to reach Meta and is reviewed
    here (a write belongs on the writer, which the dispatch side cannot import)."""
    public = {
        name
        for name, member in inspect.getmembers(MetaReader, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }
    assert public == READ_METHODS


async def test_ar19_every_read_leaves_meta_unchanged(world: GraphWorld, graph: GraphClient) -> None:
    world.add_account("act_1", "One", currency="USD")
    world.add_campaigns("act_1", 30, daily_budget=3000)
    world.grant(TOKEN, "act_1")
    before = {cid: (c.name, c.daily_budget, c.effective_status) for cid, c in _campaigns(world)}
    reader = MetaReader(graph, TOKEN)
    await reader.ad_accounts()
    page = await reader.campaigns_page("act_1", limit=10)
    while page.paging is not None and page.paging.next:
        page = await reader.campaigns_page("act_1", next_url=page.paging.next)
    ids = list(before)
    await reader.campaign(ids[0])
    await reader.insights(ids[0], date_preset="last_7d", fields=["spend"], row_type=dict)
    await reader.batch([BatchGet(cid, {"fields": ["name", "daily_budget"]}) for cid in ids[:5]])
    await reader.batch(
        [BatchGet(f"{cid}/insights", {"date_preset": "today", "fields": ["spend"]}) for cid in ids]
    )

    assert world.updates == []
    assert not [kind for kind in world.state.calls if kind.endswith((".update", ".create"))]
    assert {
        cid: (c.name, c.daily_budget, c.effective_status) for cid, c in _campaigns(world)
    } == before


def _campaigns(world: GraphWorld) -> list[tuple[str, SimCampaign]]:
    return [(cid, c) for a in world.accounts.values() for cid, c in a.campaigns.items()]
