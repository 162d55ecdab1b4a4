"""AR-26 backtest over the API: a saved rule and an unsaved rule document replayed over a past
range; bad ranges and bad documents are 422 naming the field; another workspace's rule or ad
account is 404; nothing is written to Meta or recorded."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.adrules.models import Batch
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.backtest.history import (
    PAUSE_LOSERS,
    SCALE_WINNERS,
    build_history,
    build_world,
)
from tests.engines.adrules.factories import Workspace, create_account, store_token

RANGE = {"since": "2026-02-20", "until": "2026-02-26"}


async def test_ar26_a_saved_rule_and_the_same_unsaved_document_give_the_same_backtest(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    build_world(world)
    account, rule_id, _ = await build_history(runtime, ws.workspace_id)
    saved = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/backtest", json=RANGE, headers=ws.headers
    )
    assert saved.status_code == 200, saved.text
    body = saved.json()
    assert body["estimate"] is True
    assert "old decisions" in body["note"]
    assert body["accounts"][0]["spend_paused"] == "80.00"
    assert body["totals"]["would_execute"] == 7
    unsaved = await client.post(
        "/api/v1/adrules/backtest",
        json={
            **RANGE,
            "account_ids": [account.id],
            "rule": {"name": "Draft", "tasks": [PAUSE_LOSERS, SCALE_WINNERS]},
        },
        headers=ws.headers,
    )
    assert unsaved.status_code == 200, unsaved.text
    draft = unsaved.json()
    assert draft["rule_id"] is None

    def brief(actions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(a["day"], a["object_id"], a["task_name"], a["outcome"]) for a in actions]

    assert brief(draft["actions"]) == brief(body["actions"])
    assert world.updates == []
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Batch)) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"since": "2026-02-26", "until": "2026-02-20"}, "until"),  # reversed
        ({"since": "2026-02-20", "until": "2026-03-02"}, "until"),  # today is not past yet
        ({"since": "2026-02-20", "until": "2026-04-01"}, "until"),  # the future
        ({"since": "2023-01-31", "until": "2023-02-05"}, "since"),  # beyond 37 months
        ({"since": "2026-02-20", "until": "2026-02-21", "evaluate_at": "24:00"}, "evaluate_at"),
        ({"since": "2026-02-31", "until": "2026-03-01"}, "since"),  # not a date
        ({"until": "2026-02-21"}, "since"),  # missing
    ],
)
async def test_ar26_bad_ranges_are_422_naming_the_field(
    client: httpx.AsyncClient,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    body: dict[str, Any],
    field: str,
) -> None:
    build_world(world)
    _, rule_id, _ = await build_history(runtime, ws.workspace_id)
    world.state.reset_counts()
    r = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/backtest", json=body, headers=ws.headers
    )
    assert r.status_code == 422, r.text
    named = [f"{d.get('field', '')} {d.get('message', '')}" for d in r.json()["details"]]
    assert any(field in text for text in named), r.json()
    assert world.state.count("*") == 0  # refused before any Graph call


async def test_ar26_an_invalid_unsaved_rule_is_422_naming_its_field(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    build_world(world)
    account, _, _ = await build_history(runtime, ws.workspace_id)
    task = {**SCALE_WINNERS, "action": {"type": "increase_budget", "amount": "20"}}  # no max
    r = await client.post(
        "/api/v1/adrules/backtest",
        json={**RANGE, "account_ids": [account.id], "rule": {"name": "Draft", "tasks": [task]}},
        headers=ws.headers,
    )
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["field"] == "rule.tasks[0].action.max"
    unknown = await client.post(
        "/api/v1/adrules/backtest",
        json={**RANGE, "rule": {"name": "Draft", "tasks": [{**task, "colour": "red"}]}},
        headers=ws.headers,
    )
    assert unknown.status_code in (400, 422)
    no_account = await client.post(
        "/api/v1/adrules/backtest",
        json={**RANGE, "rule": {"name": "Draft", "tasks": [SCALE_WINNERS]}},
        headers=ws.headers,
    )
    assert no_account.status_code == 422
    assert no_account.json()["details"][0]["field"] == "account_ids"


async def test_ar26_another_workspaces_rule_and_ad_account_are_404(
    client: httpx.AsyncClient,
    runtime: Runtime,
    ws: Workspace,
    other_ws: Workspace,
    world: GraphWorld,
) -> None:
    build_world(world)
    account, rule_id, _ = await build_history(runtime, ws.workspace_id)
    await store_token(runtime, other_ws.workspace_id)
    theirs = await create_account(runtime, workspace_id=other_ws.workspace_id, meta_id="act_9")
    world.state.reset_counts()
    r = await client.post(
        f"/api/v1/adrules/rules/{rule_id}/backtest", json=RANGE, headers=other_ws.headers
    )
    assert r.status_code == 404, r.text
    r = await client.post(
        "/api/v1/adrules/backtest",
        json={**RANGE, "account_ids": [account.id], "rule": {"name": "x", "tasks": [PAUSE_LOSERS]}},
        headers=other_ws.headers,
    )
    assert r.status_code == 404, r.text
    r = await client.post(
        "/api/v1/adrules/backtest",
        json={**RANGE, "account_ids": [theirs.id], "rule": {"name": "x", "tasks": [PAUSE_LOSERS]}},
        headers=ws.headers,
    )
    assert r.status_code == 404, r.text
    assert world.state.count("*") == 0
