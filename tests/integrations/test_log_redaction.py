"""Credentials in a request's query never reach the logs (PL-5: secrets never logged)."""

from __future__ import annotations

import logging

import httpx
import pytest

from app.integrations.http_guard.client import outbound_client
from app.integrations.http_guard.log_redaction import redact_url


def test_credential_values_are_redacted_and_the_rest_kept() -> None:
    url = httpx.URL(
        "https://graph.example/v21.0/debug_token?input_token=EAAB123&fields=id&client_secret=s3"
    )
    text = redact_url(url)
    assert "EAAB123" not in text
    assert "client_secret=%2A%2A%2A" in text
    assert "input_token=%2A%2A%2A" in text
    assert "fields=id" in text


async def test_an_outbound_request_logs_its_url_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    async with outbound_client(provider="meta", transport=transport) as client:
        await client.get("https://graph.example/debug_token", params={"input_token": "EAAB-secret"})
    assert "debug_token" in caplog.text
    assert "EAAB-secret" not in caplog.text
