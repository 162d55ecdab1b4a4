"""PL-3 secrets: encrypted at rest, never returned by the API, never written to logs."""

from __future__ import annotations

import logging

import httpx
import pytest
from sqlalchemy import select, text

from app.logs import JsonFormatter, TextFormatter, redact
from app.platform import service
from app.platform.crypto import SecretBox, SecretBoxError
from app.platform.models import Secret
from app.runtime import Runtime
from tests.conftest import auth
from tests.platform.conftest import ApiTenant

Tenant = ApiTenant


@pytest.fixture
def tenant(api_tenant: ApiTenant) -> ApiTenant:
    """These tests act through an API key only."""
    return api_tenant


PLAINTEXT = "EAAG-meta-token-Zm9vYmFyYmF6cXV4"


def formatted(records: list[logging.LogRecord]) -> str:
    """Every captured line as both formatters would write it, plus the raw messages."""
    json_fmt, text_fmt = JsonFormatter(), TextFormatter()
    return "\n".join(f"{json_fmt.format(r)}\n{text_fmt.format(r)}" for r in records)


async def test_pl3_secret_is_encrypted_at_rest(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    r = await client.put(
        "/api/v1/secrets/meta_token", json={"value": PLAINTEXT}, headers=auth(tenant)
    )
    assert r.status_code == 200
    async with runtime.db.read() as session:
        stored = await session.scalar(select(Secret.ciphertext).where(Secret.name == "meta_token"))
        raw_rows = (await session.execute(text("SELECT * FROM secrets"))).all()
        value = await service.get_secret(
            session, runtime.secrets, workspace_id=tenant.workspace_id, name="meta_token"
        )
    assert stored is not None
    assert PLAINTEXT.encode() not in bytes(stored)
    assert all(PLAINTEXT not in str(col) for row in raw_rows for col in row)
    assert value == PLAINTEXT
    # A different key cannot read it.
    from cryptography.fernet import Fernet

    with pytest.raises(SecretBoxError):
        SecretBox(Fernet.generate_key().decode()).decrypt(bytes(stored))


async def test_pl3_secret_is_never_returned_by_the_api(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    r = await client.put(
        "/api/v1/secrets/meta_token", json={"value": PLAINTEXT}, headers=auth(tenant)
    )
    assert PLAINTEXT not in r.text
    assert r.json() == {"names": ["meta_token"]}
    r = await client.get("/api/v1/secrets", headers=auth(tenant))
    assert PLAINTEXT not in r.text
    assert (await client.get("/api/v1/secrets/meta_token", headers=auth(tenant))).status_code in (
        404,
        405,
    )
    assert (
        await client.delete("/api/v1/secrets/meta_token", headers=auth(tenant))
    ).status_code == 204
    assert (await client.get("/api/v1/secrets", headers=auth(tenant))).json() == {"names": []}


async def test_pl3_secret_name_is_validated(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await client.put("/api/v1/secrets/" + "x" * 101, json={"value": "v"}, headers=auth(tenant))
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "name"
    r = await client.put("/api/v1/secrets/..%20bad", json={"value": "v"}, headers=auth(tenant))
    assert r.status_code == 422


async def test_pl3_neither_secret_nor_api_key_reaches_the_logs(
    client: httpx.AsyncClient, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await client.put(
        "/api/v1/secrets/smtp_password", json={"value": PLAINTEXT}, headers=auth(tenant)
    )
    await client.get("/api/v1/workspace", headers=auth(tenant))
    await client.put("/api/v1/secrets/smtp_password", content=b"{broken", headers=auth(tenant))
    await client.get(f"/api/v1/workspace?token={tenant.ingest_token}", headers=auth(tenant))
    assert caplog.records, "the requests logged nothing at all"
    # What the app itself logged, before any masking (the test client's own httpx lines aside)...
    raw = "\n".join(
        r.getMessage() + " " + str(vars(r)) for r in caplog.records if r.name != "httpx"
    )
    assert "/api/v1/workspace" in raw  # the request lines are there...
    assert PLAINTEXT not in raw  # ...but not the secret,
    assert tenant.api_key not in raw  # the API key,
    assert tenant.ingest_token not in raw  # or a token passed in a query string.
    # ...and every line as the configured formatters would write it.
    written = formatted(caplog.records)
    for secret in (PLAINTEXT, tenant.api_key, tenant.ingest_token):
        assert secret not in written


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        (
            "GET https://graph.facebook.com/v21.0/act_1?access_token=EAAGabc123&fields=x",
            "EAAGabc123",
        ),
        ("Authorization: Bearer swl_abcdefghijklmnop", "swl_abcdefghijklmnop"),
        ("sent swl_AbCdEfGh12345678 to the client", "swl_AbCdEfGh12345678"),
        ("ingest swi_AbCdEfGh12345678", "swi_AbCdEfGh12345678"),
        ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
        ("password=hunter2hunter2 user=a", "hunter2hunter2"),
        ("api_key: sk_live_123456", "sk_live_123456"),
        ('{"secret": "s3cr3t-value"}', "s3cr3t-value"),
    ],
)
def test_pl3_redact_masks_secret_shapes(line: str, secret: str) -> None:
    masked = redact(line)
    assert secret not in masked
    assert "***" in masked


def test_pl3_redact_leaves_ordinary_text_alone() -> None:
    line = "rule 12 paused ad set 345 (cpa 12.50 > 10.00)"
    assert redact(line) == line


def test_pl3_formatters_redact_messages_and_extras() -> None:
    record = logging.makeLogRecord(
        {
            "msg": "calling %s",
            "args": ("https://x/?access_token=EAAGsecret1",),
            "levelno": 20,
            "levelname": "INFO",
            "name": "t",
            "url": "https://x/?access_token=EAAGsecret2",
        }
    )
    for fmt in (JsonFormatter(), TextFormatter()):
        out = fmt.format(record)
        assert "EAAGsecret1" not in out
        assert "EAAGsecret2" not in out
