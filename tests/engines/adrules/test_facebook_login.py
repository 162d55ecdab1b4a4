"""Connect with Facebook (AR-29 to AR-32) over HTTP against the Graph simulator: the dialog, the code
exchanged for a long-lived token, the accounts picked; a token checked with ``debug_token`` before
it is saved (invalid, expired, missing scope, Meta answering garbage or not at all); the expiry and
the reconnect prompt; the ``state`` bound to the session, single use, expiring."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from app.clock import ManualClock
from app.engines.adrules import accounts as account_service
from app.engines.adrules.connection import service as connection_service
from app.engines.adrules.connection.verdict import judge, reconnect_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.errors import MetaTokenRefused, MetaUnavailable
from app.integrations.meta.client import GraphClient
from app.integrations.meta.login import MetaLogin, TokenFacts
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld
from app.sandbox.meta.oauth import ADS_SCOPES, SIM_APP_ID, SimTokenInfo
from app.wiring import adrules_deps
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in


def _headers(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.api_key}"}


async def _start(client: httpx.AsyncClient) -> str:
    """Press Connect with Facebook; the dialog URL the browser is sent to."""
    answer = await client.get("/ui/adrules/meta/connect")
    assert answer.status_code == 303, answer.text
    return answer.headers["location"]


async def _dialog(dialog_url: str) -> str:
    """The simulated person answers the dialog; the callback path and query Meta sends back."""
    async with httpx.AsyncClient() as browser:
        reply = await browser.get(dialog_url)
    assert reply.status_code == 302, reply.text
    back = urlsplit(reply.headers["location"])
    return f"{back.path}?{back.query}"


def _world_on_clock(world: GraphWorld, clock: ManualClock) -> None:
    world.oauth.now = clock.now
    world.add_account("act_71", "Shop DE", currency="EUR")
    world.add_account("act_72", "Shop FR", currency="EUR")


async def test_ar29_connect_pick_accounts_and_expiry_shown(
    client: httpx.AsyncClient,
    runtime: Runtime,
    world: GraphWorld,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    _world_on_clock(world, clock)
    await sign_in(client, tenant.email, tenant.password)
    dialog = await _start(client)
    query = parse_qs(urlsplit(dialog).query)
    assert query["client_id"] == [SIM_APP_ID]
    assert query["scope"] == ["ads_read,ads_management"]
    assert query["redirect_uri"][0].endswith("/ui/adrules/meta/callback")
    callback = await _dialog(dialog)

    done = await client.get(callback)
    assert done.status_code == 302, done.text
    assert done.headers["location"] == "/ui/adrules/accounts/pick"
    assert world.state.calls["oauth.access_token"] == 2  # the code, then fb_exchange_token
    assert world.state.calls["debug_token"] == 1

    pick = await client.get("/ui/adrules/accounts/pick")
    assert pick.status_code == 200
    assert "act_71" in pick.text
    assert "act_72" in pick.text
    saved = await client.post(
        "/ui/adrules/accounts/pick",
        data={"_csrf_token": csrf_from(pick.text), "account": "act_72"},
    )
    assert saved.status_code == 200, saved.text
    async with runtime.db.read() as session:
        stored = await account_service.list_accounts(session, tenant.workspace_id)
    assert [(a.meta_id, a.active) for a in stored] == [("act_71", False), ("act_72", True)]

    state = (await client.get("/api/v1/adrules/meta-token", headers=_headers(tenant))).json()
    assert state["source"] == "facebook_login"
    assert state["scopes"] == list(ADS_SCOPES)
    expires = datetime.fromisoformat(state["expires_at"])
    assert timedelta(days=59) < expires - clock.now() < timedelta(days=61)  # long-lived
    assert state["reconnect"] is False
    page = await client.get("/ui/adrules/accounts")
    assert 'id="reconnect"' not in page.text

    # A week before it expires the dashboard asks for a reconnect (AR-31).
    clock.advance(days=54)
    state = (await client.get("/api/v1/adrules/meta-token", headers=_headers(tenant))).json()
    assert state["reconnect"] is True
    await sign_in(client, tenant.email, tenant.password)  # the browser session ran out meanwhile
    for path in ("/ui/adrules/accounts", "/ui/adrules"):
        shown = await client.get(path)
        assert 'id="reconnect"' in shown.text
        assert "Reconnect with Facebook" in shown.text


async def test_ar32_state_is_single_use_session_bound_and_expiring(
    client: httpx.AsyncClient,
    runtime: Runtime,
    world: GraphWorld,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    _world_on_clock(world, clock)
    await sign_in(client, tenant.email, tenant.password)

    # Another session of the same person cannot use this session's state.
    callback = await _dialog(await _start(client))
    other = httpx.AsyncClient(transport=client._transport, base_url=client.base_url)
    async with other:
        await sign_in(other, tenant.email, tenant.password)
        stolen = await other.get(callback)
    assert stolen.status_code == 422
    assert "not started from this session" in stolen.text
    assert world.state.calls["oauth.access_token"] == 0

    # Used once (here), refused the second time.
    callback = await _dialog(await _start(client))
    assert (await client.get(callback)).status_code == 302
    again = await client.get(callback)
    assert again.status_code == 422
    assert "already used" in again.text
    assert world.state.calls["oauth.access_token"] == 2

    # Older than ten minutes: refused, Meta not asked.
    callback = await _dialog(await _start(client))
    clock.advance(minutes=11)
    late = await client.get(callback)
    assert late.status_code == 422
    assert world.state.calls["oauth.access_token"] == 2

    # A made-up state.
    forged = await client.get("/ui/adrules/meta/callback?code=AQxyz&state=forged")
    assert forged.status_code == 422


async def test_ar29_bad_code_and_cancelled_dialog_are_plain_refusals(
    client: httpx.AsyncClient,
    runtime: Runtime,
    world: GraphWorld,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    _world_on_clock(world, clock)
    await sign_in(client, tenant.email, tenant.password)
    callback = await _dialog(await _start(client))
    state = parse_qs(urlsplit(callback).query)["state"][0]
    bad = await client.get(f"/ui/adrules/meta/callback?code=not-a-code&state={state}")
    assert bad.status_code == 422
    assert "Meta refused the login code (Invalid verification code format.)" in bad.text

    world.oauth.answer.deny = True
    cancelled = await client.get(await _dialog(await _start(client)))
    assert cancelled.status_code == 422
    assert "Facebook Login was not completed (user_denied)" in cancelled.text
    async with runtime.db.read() as session:
        assert not await account_service.has_token(session, tenant.workspace_id)


@pytest.mark.parametrize(
    ("info", "reason", "words"),
    [
        (None, "token_invalid", "Meta does not accept this access token"),
        ("expired", "token_expired", "This access token expired on"),
        ("read_only", "token_scope_missing", "lacks the permission ads_management"),
    ],
)
async def test_ar30_a_pasted_token_is_checked_before_it_is_saved(
    client: httpx.AsyncClient,
    runtime: Runtime,
    world: GraphWorld,
    tenant: Tenant,
    clock: ManualClock,
    info: str | None,
    reason: str,
    words: str,
) -> None:
    world.oauth.now = clock.now
    token = "EAAB-pasted-token-0123456789"
    if info is not None:
        world.grant(token)
        now = clock.now()
        world.oauth.info[token] = SimTokenInfo(
            SIM_APP_ID,
            "1001",
            ("ads_read",) if info == "read_only" else ADS_SCOPES,
            now - timedelta(days=70),
            now - timedelta(days=10) if info == "expired" else now + timedelta(days=50),
        )
    answer = await client.put(
        "/api/v1/adrules/meta-token", json={"token": token}, headers=_headers(tenant)
    )
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["code"] == "meta_token_refused"
    assert body["details"][0]["field"] == "token"
    assert body["details"][0]["code"] == reason
    assert words in body["message"]
    assert token not in answer.text
    async with runtime.db.read() as session:
        assert not await account_service.has_token(session, tenant.workspace_id)


async def test_ar30_meta_answering_garbage_saves_nothing(
    client: httpx.AsyncClient, runtime: Runtime, world: GraphWorld, tenant: Tenant
) -> None:
    world.grant("EAAB-good-token-0123456789")
    world.answer_html("debug_token")
    answer = await client.put(
        "/api/v1/adrules/meta-token",
        json={"token": "EAAB-good-token-0123456789"},
        headers=_headers(tenant),
    )
    assert answer.status_code == 502
    assert "Meta could not be asked to check the token" in answer.json()["message"]
    async with runtime.db.read() as session:
        assert not await account_service.has_token(session, tenant.workspace_id)
    # The same token, Meta answering: saved, as pasted.
    ok = await client.put(
        "/api/v1/adrules/meta-token",
        json={"token": "EAAB-good-token-0123456789"},
        headers=_headers(tenant),
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["source"] == "pasted"
    assert ok.json()["expires_at"] is None


async def test_ar30_meta_timing_out_is_a_clear_error(
    world: GraphWorld, runtime: Runtime, clock: ManualClock
) -> None:
    world.grant("EAAB-good-token-0123456789")
    world.hang("debug_token", seconds=30)
    deps = runtime.resources.require(AdRulesDeps)
    assert deps.login is not None
    graph = GraphClient(deps.graph.base_url, "v21.0", timeout_seconds=0.3)
    try:
        with pytest.raises(MetaUnavailable, match="did not answer in time"):
            await connection_service.check_token(
                MetaLogin(graph, deps.login.app), "EAAB-good-token-0123456789", now=clock.now()
            )
    finally:
        await graph.aclose()


async def test_ar30_without_a_meta_app_tokens_cannot_be_checked(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    runtime.resources.provide(
        AdRulesDeps, lambda: dataclasses.replace(adrules_deps(runtime), login=None)
    )
    answer = await client.put(
        "/api/v1/adrules/meta-token",
        json={"token": "EAAB-good-token-0123456789"},
        headers=_headers(tenant),
    )
    assert answer.status_code == 409
    assert answer.json()["code"] == "meta_app_not_configured"
    assert "META_APP_ID" in answer.json()["message"]


def test_ar30_verdict_and_ar31_reconnect_are_pure() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    stamp = int((now + timedelta(days=30)).timestamp())
    facts = TokenFacts(is_valid=True, app_id="1", expires_at=stamp, scopes=list(ADS_SCOPES))
    standing = judge(facts, app_id="1", now=now)
    assert standing.expires_at == now + timedelta(days=30)
    with pytest.raises(MetaTokenRefused, match="another Meta app"):
        judge(facts, app_id="2", now=now)
    with pytest.raises(MetaTokenRefused, match="ads_read and ads_management"):
        judge(dataclasses_replace(facts, scopes=[]), app_id="1", now=now)
    assert judge(dataclasses_replace(facts, expires_at=0), app_id="1", now=now).expires_at is None
    assert not reconnect_due(None, now)
    assert not reconnect_due(now + timedelta(days=8), now)
    assert reconnect_due(now + timedelta(days=7), now)
    assert reconnect_due(now - timedelta(days=1), now)


def dataclasses_replace(facts: TokenFacts, **changes: object) -> TokenFacts:
    import msgspec

    return msgspec.structs.replace(facts, **changes)
