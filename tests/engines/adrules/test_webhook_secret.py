"""AR-24 / PL-3: the ``notify_webhook`` signing secret is write-only. It is stored encrypted, the API
answers ``has_secret`` instead, an update without a secret keeps the stored one, and neither the
secret nor its ciphertext appears in responses, the job payload, the records or the logs."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.models import Task
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.scheduling.models import Job
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    dispatch_deps,
    rule_body,
    store_token,
)

SECRET = "whsec-first-0123456789"
OTHER_SECRET = "whsec-second-9876543210"
HOOK = "https://hooks.example.com/ads"


def _webhook_task(**action: Any) -> dict[str, Any]:
    return {
        "name": "tell the warehouse",
        "conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", "value": "1"}],
        "action": {"type": "notify_webhook", "url": HOOK, **action},
        "cooldown": "1h",
    }


async def _stored_secret(runtime: Runtime, task_id: int) -> str:
    """The secret as the worker will open it (and proof the stored document holds no plaintext)."""
    async with runtime.db.read() as session:
        task = await session.get(Task, task_id)
    assert task is not None
    document = msgspec.json.encode(task.document)
    assert b'secret":"whsec' not in document
    sealed = task.document["action"]["sealed_secret"]
    return runtime.secrets.decrypt(sealed.encode())


async def _create(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, **action: Any
) -> httpx.Response:
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_1")
    body = rule_body(account_ids=[account.id], tasks=[_webhook_task(**action)])
    return await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)


async def test_ar24_the_secret_is_stored_encrypted_and_answered_as_has_secret(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    created = await _create(client, runtime, ws, secret=SECRET)
    assert created.status_code == 201, created.text
    rule = created.json()
    assert rule["tasks"][0]["action"] == {"type": "notify_webhook", "url": HOOK, "has_secret": True}
    task_id = rule["tasks"][0]["id"]
    assert await _stored_secret(runtime, task_id) == SECRET

    for path in (f"/rules/{rule['id']}", "/rules", f"/rules/{rule['id']}/tasks"):
        response = await client.get(f"/api/v1/adrules{path}", headers=ws.headers)
        assert response.status_code == 200
        assert 'secret"' not in response.text.replace('has_secret"', "")
        assert SECRET not in response.text


async def test_ar24_an_update_without_a_secret_keeps_the_stored_one(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    rule = (await _create(client, runtime, ws, secret=SECRET)).json()
    task_id = rule["tasks"][0]["id"]
    base = f"/api/v1/adrules/rules/{rule['id']}"
    # The rule as read, sent back whole (has_secret and all): the secret stays.
    body = {k: rule[k] for k in ("name", "status", "account_ids", "prefilters", "schedule")}
    body["tasks"] = rule["tasks"]
    body["name"] = "Renamed"
    replaced = await client.put(base, json=body, headers=ws.headers)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["tasks"][0]["action"]["has_secret"] is True
    assert await _stored_secret(runtime, task_id) == SECRET

    # One task updated without a secret keeps it too; with a secret, it is replaced.
    task = {**_webhook_task(), "name": "renamed task"}
    kept = await client.put(f"{base}/tasks/{task_id}", json=task, headers=ws.headers)
    assert kept.status_code == 200, kept.text
    assert kept.json()["action"] == {"type": "notify_webhook", "url": HOOK, "has_secret": True}
    assert await _stored_secret(runtime, task_id) == SECRET
    changed = await client.put(
        f"{base}/tasks/{task_id}", json=_webhook_task(secret=OTHER_SECRET), headers=ws.headers
    )
    assert changed.status_code == 200, changed.text
    assert OTHER_SECRET not in changed.text
    assert await _stored_secret(runtime, task_id) == OTHER_SECRET


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ({}, "tasks[0].action.secret"),
        ({"has_secret": True}, "tasks[0].action.secret"),
        ({"sealed_secret": "gAAAAB-forged"}, "tasks[0].action.sealed_secret"),
    ],
)
async def test_ar24_a_new_webhook_needs_a_secret_and_cannot_set_the_ciphertext(
    client: httpx.AsyncClient,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    action: dict[str, Any],
    field: str,
) -> None:
    response = await _create(client, runtime, ws, **action)
    assert response.status_code == 422, response.text
    assert [d["field"] for d in response.json()["details"]] == [field]
    async with runtime.db.read() as session:
        assert (await session.scalars(select(Task))).all() == []


async def test_ar24_a_task_added_without_a_secret_is_refused(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    rule = (await _create(client, runtime, ws, secret=SECRET)).json()
    path = f"/api/v1/adrules/rules/{rule['id']}/tasks"
    refused = await client.post(path, json=_webhook_task(), headers=ws.headers)
    assert refused.status_code == 422
    assert refused.json()["details"][0]["field"] == "task.action.secret"
    added = await client.post(path, json=_webhook_task(secret=OTHER_SECRET), headers=ws.headers)
    assert added.status_code == 201, added.text
    assert added.json()["action"]["has_secret"] is True
    assert await _stored_secret(runtime, added.json()["id"]) == OTHER_SECRET


async def test_ar24_the_job_payload_and_logs_never_carry_the_plain_secret(
    client: httpx.AsyncClient,
    runtime: Runtime,
    ws: Workspace,
    world: GraphWorld,
    graph: GraphClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    world.add_account("act_1", "Shop")
    world.add_campaigns("act_1", 3)
    world.grant(TOKEN, "act_1")
    await store_token(runtime, ws.workspace_id)
    assert (await _create(client, runtime, ws, secret=SECRET)).status_code == 201

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    async with runtime.db.read() as session:
        (job,) = (await session.scalars(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).all()
    assert SECRET.encode() not in job.payload
    assert b"sealed_secret" in job.payload  # the worker opens it when it signs
    assert SECRET not in caplog.text


async def test_ar24_ar27_a_slack_url_is_stored_encrypted_and_answered_masked(
    client: httpx.AsyncClient, runtime: Runtime, ws: Workspace, world: GraphWorld
) -> None:
    """A Slack (or Teams) incoming-webhook URL is the credential: stored encrypted, answered
    masked; the rule sent back as read keeps it; a masked URL that is not the stored one is
    refused, naming the field."""
    slack = "https://hooks.example.com/services/T000/B000/XXXXXXXXXXXXsecret"
    created = await _create(client, runtime, ws, url=slack, format="slack")
    assert created.status_code == 201, created.text
    rule = created.json()
    action = rule["tasks"][0]["action"]
    assert action == {
        "type": "notify_webhook",
        "url": "https://hooks.example.com/…secret",
        "format": "slack",
        "has_secret": True,
    }
    assert await _stored_secret(runtime, rule["tasks"][0]["id"]) == slack
    body = {k: rule[k] for k in ("name", "status", "account_ids", "prefilters", "schedule")}
    body["tasks"] = rule["tasks"]
    base = f"/api/v1/adrules/rules/{rule['id']}"
    kept = await client.put(base, json=body, headers=ws.headers)
    assert kept.status_code == 200, kept.text
    assert await _stored_secret(runtime, rule["tasks"][0]["id"]) == slack
    forged = {**rule["tasks"][0], "action": {**action, "url": "https://hooks.example.com/…other"}}
    refused = await client.put(base, json={**body, "tasks": [forged]}, headers=ws.headers)
    assert refused.status_code == 422
    assert refused.json()["details"][0]["field"] == "tasks[0].action.url"
    teams = {
        **rule["tasks"][0],
        "action": {"type": "notify_webhook", "url": slack, "format": "teams", "secret": SECRET},
    }
    signed = await client.put(base, json={**body, "tasks": [teams]}, headers=ws.headers)
    assert signed.status_code == 422
    assert "takes no signing secret" in signed.text
