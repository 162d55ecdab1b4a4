"""AR-12 paging as Meta pages, AR-23a archived and deleted objects out of scope, and issue 11's
"outside APIs never block a sweep": against the Graph API simulator over loopback."""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qsl, urlsplit

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.claim.fetch import FetchFailed, fetch_campaigns
from app.engines.adrules.models import Batch
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import MetaReader
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    dispatch_deps,
    drive_tick,
    store_token,
)
from tests.harness.sleep import RecordingSleep


async def _jobs(runtime: Runtime) -> list[RunAccountPayload]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).scalars()
        return [msgspec.json.decode(j.payload, type=RunAccountPayload) for j in rows]


async def _batches(runtime: Runtime) -> list[Batch]:
    async with runtime.db.read() as session:
        return list((await session.execute(select(Batch).order_by(Batch.id))).scalars())


async def _account(
    runtime: Runtime, world: GraphWorld, ws: Workspace, meta_id: str, campaigns: int
) -> int:
    world.add_account(meta_id, f"Account {meta_id}")
    world.add_campaigns(meta_id, campaigns)
    world.grant(TOKEN, meta_id)
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id=meta_id)
    return account.id


async def test_ar12_paging_follows_next_exactly_through_an_empty_middle_page(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    account_id = await _account(runtime, world, ws, "act_1", 2_500)
    await store_token(runtime, ws.workspace_id)
    # 1000, then an empty page with no cursors but a ``next``, then the rest.
    world.page_sizes = [1000, 0]
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account_id])

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    (job,) = await _jobs(runtime)
    assert len({e.id for e in job.entities}) == 2_500
    # Every request after the first is the previous page's ``next`` link, query for query.
    links = [link for link in world.next_links if link is not None]
    assert len(world.list_params) == len(links) + 1
    for link, received in zip(links, world.list_params[1:], strict=True):
        assert dict(parse_qsl(urlsplit(link).query)) == received
    assert world.next_links[-1] is None


async def test_ar12_a_repeated_next_link_stops_the_fetch(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    account_id = await _account(runtime, world, ws, "act_1", 50)
    await store_token(runtime, ws.workspace_id)
    world.page_sizes = [10, 10, 10, 10, 10]
    world.repeat_next_link = True
    await create_rule(runtime, workspace_id=ws.workspace_id, account_ids=[account_id])

    summary = await dispatch_due(
        dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now
    )

    assert summary.skipped_accounts == 1
    (batch,) = await _batches(runtime)
    assert batch.status == "skipped"
    assert "repeated a paging link" in (batch.error or "")
    # The first page, then its link, whose page links back to itself: not requested again.
    assert world.count("campaigns.list") == 2


async def test_ar12_the_page_ceiling_ends_an_endless_list(
    world: GraphWorld, graph: GraphClient
) -> None:
    world.add_account("act_1", "Big")
    world.add_campaigns("act_1", 30)
    world.grant(TOKEN, "act_1")
    with pytest.raises(FetchFailed) as failed:
        await fetch_campaigns(
            MetaReader(graph, TOKEN), "act_1", [], sleep=RecordingSleep(), page_size=5, max_pages=4
        )
    assert "more than 4 pages" in failed.value.error.describe()
    assert failed.value.pages == 4


async def test_ar12_a_paging_link_to_another_host_is_not_followed(graph: GraphClient) -> None:
    assert graph.owns(graph.url("act_1/campaigns?after=x"))
    assert not graph.owns("https://evil.example/v21.0/act_1/campaigns?after=x")


async def test_ar23a_archived_and_deleted_campaigns_stay_out_of_a_not_in_prefilter(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    world.add_account("act_1", "Mixed")
    world.grant(TOKEN, "act_1")
    world.add_campaigns(
        "act_1", 12, statuses=("ACTIVE", "PAUSED", "ARCHIVED", "DELETED", "WITH_ISSUES", "ACTIVE")
    )
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=[account.id],
        prefilters={"effective_status": {"operator": "not_in", "values": ["PAUSED"]}},
    )

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    (job,) = await _jobs(runtime)
    statuses = sorted(e.effective_status for e in job.entities)
    assert statuses == ["ACTIVE"] * 4 + ["WITH_ISSUES"] * 2
    assert world.filters_seen == [
        [
            {
                "field": "effective_status",
                "operator": "NOT_IN",
                "value": ["ARCHIVED", "DELETED", "PAUSED"],
            }
        ]
    ]


async def test_ar23a_an_in_prefilter_naming_archived_asks_for_them(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    world.add_account("act_1", "Mixed")
    world.grant(TOKEN, "act_1")
    world.add_campaigns("act_1", 4, statuses=("ACTIVE", "ARCHIVED"))
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    await store_token(runtime, ws.workspace_id)
    await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=[account.id],
        prefilters={"effective_status": {"operator": "in", "values": ["ARCHIVED"]}},
    )

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    (job,) = await _jobs(runtime)
    assert [e.effective_status for e in job.entities] == ["ARCHIVED", "ARCHIVED"]


async def test_issue11_a_hanging_account_is_skipped_and_other_rules_keep_their_ticks(
    runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    healthy = await _account(runtime, world, ws, "act_1", 3)
    hanging = await _account(runtime, world, ws, "act_2", 3)
    await store_token(runtime, ws.workspace_id)
    world.hang("campaigns.list:act_2", seconds=120)
    await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=[healthy],
        schedule={"mode": "interval", "minutes": 1},
    )
    await create_rule(
        runtime,
        workspace_id=ws.workspace_id,
        account_ids=[hanging],
        schedule={"mode": "interval", "minutes": 1},
    )
    deps = dataclasses.replace(dispatch_deps(runtime, graph=graph), fetch_deadline_seconds=0.3)

    # Two ticks a minute apart: each ends at the account's deadline, not after Meta's 120 s.
    for _ in range(2):
        begun = runtime.clock.monotonic()
        summary = await drive_tick(deps, world, runtime.clock.now(), step=0.1)
        assert (summary.rules, summary.jobs, summary.skipped_accounts) == (2, 1, 1)
        assert runtime.clock.monotonic() - begun == pytest.approx(0.3, abs=0.1)
        runtime.clock.advance(60)  # type: ignore[attr-defined]

    batches = await _batches(runtime)
    by_account: dict[str, list[Batch]] = {}
    for batch in batches:
        by_account.setdefault(batch.account_meta_id, []).append(batch)
    assert [b.status for b in by_account["act_1"]] == ["queued", "queued"]
    assert [b.status for b in by_account["act_2"]] == ["skipped", "skipped"]
    assert all("did not arrive within 0.3 s" in (b.error or "") for b in by_account["act_2"])
