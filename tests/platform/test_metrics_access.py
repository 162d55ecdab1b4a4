"""PL-14: ``GET /metrics`` is not public. On the public listener it answers only a scrape with
``Authorization: Bearer <METRICS_TOKEN>`` (and does not exist while no token is set); on the
separate listener ``METRICS_BIND`` asks for, it answers without the token, and nothing else is
served there."""

from __future__ import annotations

import dataclasses
import socket

import httpx
import pytest

from app.clock import ManualClock
from app.runtime import Runtime
from app.settings import Settings, load_settings
from app.settings_fields import SettingsError
from app.web.metrics_listener import MetricsListener
from tests.conftest import METRICS_TOKEN, auth, metrics_auth
from tests.factories import Tenant
from tests.harness.app_client import app_client


async def test_pl14_the_token_opens_metrics(client: httpx.AsyncClient) -> None:
    response = await client.get("/metrics", headers=metrics_auth())
    assert response.status_code == 200
    assert "# TYPE sweepline_sweep_lag_seconds" in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": f"Bearer {METRICS_TOKEN}x"},
        {"Authorization": f"Basic {METRICS_TOKEN}"},
        {"Authorization": "Bearer "},
    ],
    ids=["none", "another-token", "not-bearer", "empty"],
)
async def test_pl14_metrics_without_the_token_answer_401(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "sweepline_" not in response.text


async def test_pl14_a_workspace_key_does_not_open_metrics(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """The platform-wide counters are not a tenant's: an owner's API key is not the token."""
    assert (await client.get("/metrics", headers=auth(tenant))).status_code == 401


async def test_pl14_without_a_token_setting_metrics_do_not_exist(
    settings: Settings, clock: ManualClock
) -> None:
    web = dataclasses.replace(settings.web, metrics_token="")
    async with app_client(dataclasses.replace(settings, web=web), clock) as client:
        for headers in ({}, metrics_auth(), {"Authorization": "Bearer "}):
            response = await client.get("/metrics", headers=headers)
            assert response.status_code == 404


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_pl14_the_separate_listener_serves_metrics_alone_without_the_token(
    runtime: Runtime,
) -> None:
    port = free_port()
    listener = MetricsListener(runtime, "127.0.0.1", port)
    await listener.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as scraper:
            scrape = await scraper.get("/metrics")
            assert scrape.status_code == 200
            assert scrape.headers["content-type"].startswith("text/plain")
            assert "# TYPE sweepline_jobs_queued" in scrape.text
            for other in ("/health", "/api/v1/queue", "/", "/metrics/x"):
                assert (await scraper.get(other)).status_code == 404, other
            assert (await scraper.post("/metrics")).status_code == 404
    finally:
        await listener.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as late:
            await late.get(f"http://127.0.0.1:{port}/metrics")


async def test_pl14_a_listener_that_cannot_bind_says_so(runtime: Runtime) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="METRICS_BIND"):
            await MetricsListener(runtime, "127.0.0.1", port).start()


@pytest.mark.parametrize("value", ["9100", "localhost", ":9100", "host:port", "127.0.0.1:70000"])
def test_pl14_metrics_bind_must_be_host_and_port(value: str) -> None:
    with pytest.raises(SettingsError, match="METRICS_BIND"):
        load_settings({"METRICS_BIND": value})


@pytest.mark.parametrize(
    ("value", "bind"), [("127.0.0.1:9100", "127.0.0.1:9100"), ("[::1]:9100", "::1:9100")]
)
def test_pl14_metrics_bind_reads_ipv4_and_ipv6(value: str, bind: str) -> None:
    from app.settings_web import parse_bind

    assert load_settings({"METRICS_BIND": value}).web.metrics_bind == value
    host, port = parse_bind("METRICS_BIND", value) or ("", 0)
    assert f"{host}:{port}" == bind
