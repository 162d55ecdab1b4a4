"""Custom metrics read with a Google service account (AR-15): the workspace stores the account's
JSON key, a JWT signed RS256 with it is exchanged at the token endpoint (the Sheets simulator's
``POST /token``) for a bearer token, which is cached until shortly before it expires (on a
ManualClock)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from app.clock import ManualClock
from app.engines.adrules.work.sheets_values import (
    SHEETS_API_KEY_SECRET,
    SHEETS_SERVICE_ACCOUNT_SECRET,
    CustomMetricSource,
    SheetCache,
    workspace_credentials,
)
from app.integrations.sheets import ServiceAccount, SheetsClient, SheetsError, TokenMinter
from app.integrations.sheets.service_account import SCOPE, parse_key, signed_assertion
from app.platform import service
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.sheets import SheetsSandbox
from tests.engines.adrules.factories import Workspace

SHEET_ID = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74"
ACCOUNT = "rules-reader@sweepline-demo.iam.gserviceaccount.com"


def _claims(jwt: str) -> dict[str, object]:
    part = jwt.split(".")[1]
    decoded: dict[str, object] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


@pytest.fixture
async def sheets() -> AsyncIterator[tuple[SheetsSandbox, str]]:
    sandbox = SheetsSandbox(api_keys=set(), bearer_tokens=set())  # only minted tokens are accepted
    sandbox.put_sheet(SHEET_ID, "Targets", [["campaign_id", "min_roas"], ["100001", "2.5"]])
    async with simulator_in_loop(sandbox) as url:
        yield sandbox, url


async def _store(runtime: Runtime, workspace_id: int, name: str, value: str) -> None:
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=workspace_id,
            name=name,
            value=value,
            now=runtime.clock.now(),
        )


def test_the_assertion_is_an_rs256_jwt_for_the_token_endpoint(clock: ManualClock) -> None:
    sandbox = SheetsSandbox()
    key = parse_key(sandbox.new_service_account(ACCOUNT))
    audience = "http://127.0.0.1:9/token"

    jwt = signed_assertion(key, audience=audience, issued_at=clock.now())

    claims = _claims(jwt)
    iat = int(clock.now().timestamp())
    assert claims == {
        "iss": ACCOUNT,
        "scope": SCOPE,
        "aud": audience,
        "iat": iat,
        "exp": iat + 3600,
    }
    head, body, signature = jwt.split(".")
    sandbox.service_accounts[ACCOUNT].verify(
        base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
        f"{head}.{body}".encode(),
        padding.PKCS1v15(),
        hashes.SHA256(),
    )
    assert sandbox.exchange(jwt, audience)[0] == 200
    assert sandbox.exchange(jwt, "http://elsewhere/token")[0] == 400
    assert sandbox.exchange(jwt[:-4] + "AAAA", audience)[0] == 400  # a forged signature


def test_a_key_that_is_not_a_service_account_key_is_refused() -> None:
    with pytest.raises(SheetsError, match="not a JSON key"):
        parse_key("{not json")
    with pytest.raises(SheetsError, match="PEM"):
        parse_key(
            json.dumps({"type": "service_account", "client_email": ACCOUNT, "private_key": "x"})
        )


async def test_ar15_a_service_account_reads_the_sheet_with_a_minted_cached_token(
    runtime: Runtime, clock: ManualClock, ws: Workspace, sheets: tuple[SheetsSandbox, str]
) -> None:
    sandbox, url = sheets
    await _store(runtime, ws.workspace_id, SHEETS_API_KEY_SECRET, "an-api-key-that-is-ignored")
    await _store(
        runtime,
        ws.workspace_id,
        SHEETS_SERVICE_ACCOUNT_SECRET,
        sandbox.new_service_account(ACCOUNT),
    )
    minter = TokenMinter(f"{url}/token", now=clock.now)
    client = SheetsClient(url)
    try:
        credentials = await workspace_credentials(
            runtime.db, runtime.secrets, ws.workspace_id, minter
        )
        assert isinstance(credentials, ServiceAccount)  # preferred over the API key
        assert "PRIVATE KEY" not in repr(credentials)

        async def read() -> Decimal | None:
            source = CustomMetricSource(
                db=runtime.db,
                clock=clock,
                client=client,
                cache=SheetCache(),  # no row cache: every read goes to the Sheets API
                workspace_id=ws.workspace_id,
                credentials=credentials,
            )
            got = await source.value(
                spreadsheet_id=SHEET_ID,
                sheet_name="Targets",
                lookup_column="A",
                value_column="B",
                campaign_id="100001",
            )
            assert got.error is None, got.error
            assert got.source == "live"
            return got.value

        assert await read() == Decimal("2.5")
        assert (sandbox.state.count("token"), sandbox.minted) == (1, 1)

        # Within the token's hour (less the refresh margin) the same token serves every read.
        clock.advance(50 * 60)
        assert await read() == Decimal("2.5")
        assert sandbox.state.count("token") == 1

        # Five minutes before it expires a new one is minted.
        clock.advance(5 * 60)
        assert await read() == Decimal("2.5")
        assert (sandbox.state.count("token"), sandbox.minted) == (2, 2)
        assert sandbox.state.count("values.get") == 3
    finally:
        await client.aclose()
        await minter.aclose()


async def test_a_key_google_refuses_is_a_condition_error(
    runtime: Runtime, clock: ManualClock, ws: Workspace, sheets: tuple[SheetsSandbox, str]
) -> None:
    sandbox, url = sheets
    unknown = SheetsSandbox().new_service_account(ACCOUNT)  # a key this endpoint never issued
    minter = TokenMinter(f"{url}/token", now=clock.now)
    client = SheetsClient(url)
    try:
        source = CustomMetricSource(
            db=runtime.db,
            clock=clock,
            client=client,
            cache=SheetCache(),
            workspace_id=ws.workspace_id,
            credentials=ServiceAccount(unknown, minter),
        )
        got = await source.value(
            spreadsheet_id=SHEET_ID,
            sheet_name="Targets",
            lookup_column="A",
            value_column="B",
            campaign_id="100001",
        )
    finally:
        await client.aclose()
        await minter.aclose()
    assert got.value is None
    assert got.error is not None
    assert "Google refused the service account" in got.error
    assert sandbox.state.count("values.get") == 0
