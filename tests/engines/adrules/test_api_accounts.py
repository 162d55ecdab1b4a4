"""Ad accounts and the Meta token (AR-2, AR-20, AR-24): discovery stores accounts inactive, a person
activates them; the token is encrypted at rest and never returned or logged."""

from __future__ import annotations

import logging

import httpx
import pytest
from sqlalchemy import select

from app.platform.models import Secret
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from tests.engines.adrules.factories import TOKEN, Workspace


async def _set_token(client: httpx.AsyncClient, ws: Workspace, token: str = TOKEN) -> None:
    response = await client.put(
        "/api/v1/adrules/meta-token", json={"token": token}, headers=ws.headers
    )
    assert response.status_code == 200
    assert response.json()["configured"] is True
    assert response.json()["source"] == "pasted"


async def test_ar2_discovered_accounts_are_stored_inactive_and_activated_by_a_person(
    client: httpx.AsyncClient, world: GraphWorld, ws: Workspace
) -> None:
    world.add_account("act_11", "Shop DE", currency="EUR", timezone_name="Europe/Berlin")
    world.add_account("act_12", "Shop JP", currency="JPY", timezone_name="Asia/Tokyo")
    world.add_account("act_13", "Not ours")
    world.grant(TOKEN, "act_11", "act_12")
    await _set_token(client, ws)

    found = await client.post("/api/v1/adrules/accounts/discover", headers=ws.headers)
    assert found.status_code == 200, found.text
    accounts = found.json()
    assert [(a["meta_id"], a["currency"], a["active"]) for a in accounts] == [
        ("act_11", "EUR", False),
        ("act_12", "JPY", False),
    ]
    first = accounts[0]["id"]
    activated = await client.post(f"/api/v1/adrules/accounts/{first}/activate", headers=ws.headers)
    assert activated.json()["active"] is True
    assert activated.json()["activated_at"] is not None

    # A second discovery refreshes names but keeps the person's choice.
    world.accounts["act_11"].name = "Shop Germany"
    again = (await client.post("/api/v1/adrules/accounts/discover", headers=ws.headers)).json()
    assert [(a["name"], a["active"]) for a in again] == [("Shop Germany", True), ("Shop JP", False)]

    deactivated = await client.post(
        f"/api/v1/adrules/accounts/{first}/deactivate", headers=ws.headers
    )
    assert deactivated.json()["active"] is False
    listed = (await client.get("/api/v1/adrules/accounts", headers=ws.headers)).json()
    assert [a["active"] for a in listed] == [False, False]


async def test_ar24_token_is_encrypted_at_rest_never_returned_never_logged(
    client: httpx.AsyncClient,
    runtime: Runtime,
    world: GraphWorld,
    ws: Workspace,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    world.add_account("act_11", "Shop")
    world.grant(TOKEN, "act_11")
    state = await client.get("/api/v1/adrules/meta-token", headers=ws.headers)
    assert state.json()["configured"] is False
    await _set_token(client, ws)
    responses = [
        await client.get("/api/v1/adrules/meta-token", headers=ws.headers),
        await client.post("/api/v1/adrules/accounts/discover", headers=ws.headers),
        await client.get("/api/v1/adrules/accounts", headers=ws.headers),
    ]
    world.fail("adaccounts.list", code=190, status=400, message="Session has expired")
    failed = await client.post("/api/v1/adrules/accounts/discover", headers=ws.headers)
    # The token itself is refused (OAuth 190): the workspace must set a new one, a 4xx.
    assert failed.status_code == 422
    assert failed.json()["code"] == "meta_token_rejected"
    assert "Session has expired" in failed.json()["message"]
    for response in [*responses, failed]:
        assert TOKEN not in response.text
    assert TOKEN not in caplog.text
    async with runtime.db.read() as session:
        stored = (await session.execute(select(Secret.ciphertext))).scalars().all()
    assert stored
    assert all(TOKEN.encode() not in blob for blob in stored)


async def test_ar2_discovery_without_a_token_is_a_clear_409(
    client: httpx.AsyncClient, ws: Workspace, world: GraphWorld
) -> None:
    response = await client.post("/api/v1/adrules/accounts/discover", headers=ws.headers)
    assert response.status_code == 409
    assert response.json()["code"] == "meta_token_missing"
    assert world.count() == 0


async def test_a_short_token_is_refused(client: httpx.AsyncClient, ws: Workspace) -> None:
    response = await client.put(
        "/api/v1/adrules/meta-token", json={"token": "x"}, headers=ws.headers
    )
    assert response.status_code == 422
    assert response.json()["details"][0]["field"] == "token"


async def test_tenancy_another_workspaces_account_answers_404(
    client: httpx.AsyncClient, world: GraphWorld, ws: Workspace, other_ws: Workspace
) -> None:
    world.add_account("act_21", "Theirs")
    world.grant("EAAB-other-token-000000", "act_21")
    await _set_token(client, other_ws, "EAAB-other-token-000000")
    (theirs,) = (
        await client.post("/api/v1/adrules/accounts/discover", headers=other_ws.headers)
    ).json()
    for response in [
        await client.get(f"/api/v1/adrules/accounts/{theirs['id']}", headers=ws.headers),
        await client.post(f"/api/v1/adrules/accounts/{theirs['id']}/activate", headers=ws.headers),
        await client.post(
            f"/api/v1/adrules/accounts/{theirs['id']}/deactivate", headers=ws.headers
        ),
    ]:
        assert response.status_code == 404
        assert response.json()["code"] == "ad_account_not_found"
    assert (await client.get("/api/v1/adrules/accounts", headers=ws.headers)).json() == []
    still = (
        await client.get(f"/api/v1/adrules/accounts/{theirs['id']}", headers=other_ws.headers)
    ).json()
    assert still["active"] is False
