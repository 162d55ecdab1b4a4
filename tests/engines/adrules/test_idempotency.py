"""``Idempotency-Key`` on the ad-rules endpoints an outside system may retry (creating a rule,
creating one from a template, activating / deactivating an ad account, discovering accounts): the
same key and body answer the first response with one effect; the same key with another request
answers 409 and changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select

from app.engines.adrules.models import AdAccount, Rule
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import TOKEN, Workspace, create_account, rule_body, store_token

API = "/api/v1/adrules"


def _with_key(ws: Workspace, key: str) -> dict[str, str]:
    return {**ws.headers, "Idempotency-Key": key}


async def _count(runtime: Runtime, model: Any) -> int:
    async with runtime.db.read() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def _active(runtime: Runtime, account_id: int) -> bool:
    async with runtime.db.read() as session:
        account = await session.get(AdAccount, account_id)
    assert account is not None
    return account.active


async def test_a_retried_rule_creation_creates_one_rule(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    body = rule_body(status="draft")
    first = await client.post(f"{API}/rules", json=body, headers=_with_key(ws, "rule-1"))
    assert first.status_code == 201, first.text
    again = await client.post(f"{API}/rules", json=body, headers=_with_key(ws, "rule-1"))
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert await _count(runtime, Rule) == 1

    other = await client.post(
        f"{API}/rules", json=rule_body(name="Another"), headers=_with_key(ws, "rule-1")
    )
    assert other.status_code == 409
    assert other.json()["code"] == "idempotency_key_reused"
    assert await _count(runtime, Rule) == 1
    # Without a key every request is new.
    assert (await client.post(f"{API}/rules", json=body, headers=ws.headers)).status_code == 201
    assert await _count(runtime, Rule) == 2


async def test_a_retried_rule_from_template_creates_one_rule(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    path = f"{API}/templates/night_budget_reset/rules"
    body = {"name": "Night reset", "params": {"amount": "20", "hour": 23}}
    first = await client.post(path, json=body, headers=_with_key(ws, "tpl-1"))
    assert first.status_code == 201, first.text
    again = await client.post(path, json=body, headers=_with_key(ws, "tpl-1"))
    assert (again.status_code, again.json()) == (201, first.json())
    assert await _count(runtime, Rule) == 1

    changed = {**body, "params": {"amount": "25", "hour": 23}}
    conflict = await client.post(path, json=changed, headers=_with_key(ws, "tpl-1"))
    assert conflict.status_code == 409
    assert await _count(runtime, Rule) == 1


async def test_a_retried_activation_has_one_effect(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    account = await create_account(
        runtime, workspace_id=ws.workspace_id, meta_id="act_5", active=False
    )
    activate = f"{API}/accounts/{account.id}/activate"
    first = await client.post(activate, headers=_with_key(ws, "act-1"))
    assert (first.status_code, first.json()["active"]) == (200, True)
    deactivated = await client.post(
        f"{API}/accounts/{account.id}/deactivate", headers=_with_key(ws, "deact-1")
    )
    assert deactivated.json()["active"] is False

    # The activation retried late answers what it answered then and does not activate again.
    replay = await client.post(activate, headers=_with_key(ws, "act-1"))
    assert replay.status_code == 200
    assert replay.json() == first.json()
    assert replay.headers["idempotent-replayed"] == "true"
    assert await _active(runtime, account.id) is False

    # The same key on another endpoint is another request.
    reused = await client.post(
        f"{API}/accounts/{account.id}/deactivate", headers=_with_key(ws, "act-1")
    )
    assert reused.status_code == 409
    assert await _active(runtime, account.id) is False


async def test_a_retried_discovery_replays_and_stores_nothing_new(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    world.add_account("act_21", "Shop A")
    world.grant(TOKEN, "act_21")
    await store_token(runtime, ws.workspace_id)
    discover = f"{API}/accounts/discover"
    first = await client.post(discover, headers=_with_key(ws, "disc-1"))
    assert first.status_code == 200, first.text
    assert [a["meta_id"] for a in first.json()] == ["act_21"]

    world.add_account("act_22", "Shop B")
    world.grant(TOKEN, "act_22")
    replay = await client.post(discover, headers=_with_key(ws, "disc-1"))
    assert (replay.status_code, replay.json()) == (200, first.json())
    assert replay.headers["idempotent-replayed"] == "true"
    assert await _count(runtime, AdAccount) == 1

    fresh = await client.post(discover, headers=_with_key(ws, "disc-2"))
    assert [a["meta_id"] for a in fresh.json()] == ["act_21", "act_22"]


async def test_a_key_is_per_workspace(
    client: httpx.AsyncClient,
    runtime: Runtime,
    ws: Workspace,
    other_ws: Workspace,
    world: GraphWorld,
) -> None:
    body = rule_body(status="draft")
    mine = await client.post(f"{API}/rules", json=body, headers=_with_key(ws, "shared"))
    theirs = await client.post(f"{API}/rules", json=body, headers=_with_key(other_ws, "shared"))
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]
    assert await _count(runtime, Rule) == 2
