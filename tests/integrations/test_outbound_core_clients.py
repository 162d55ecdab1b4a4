"""The Meta Graph, Google Sheets and SERP clients on the one outbound HTTP core (issue 13, item 1):
their clients come from ``outbound_client`` (the product's User-Agent, no environment proxies, no
redirects followed), their errors are ``OutboundError`` s classified by the one status
classification, and their retries are the one ``RetryPolicy``.

Each client here talks to an ``httpx.MockTransport`` standing in for the provider's answers, so
the transport layer alone is what is checked; the simulators' tests cover the APIs' behaviour.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.integrations.http_guard import OutboundError, RetryPolicy
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError
from app.integrations.meta.retry import with_retries
from app.integrations.serp import SerpClient
from app.integrations.serp.errors import (
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from app.integrations.sheets import SheetsClient, SheetsError
from app.integrations.sheets.client import ApiKey
from tests.harness.sleep import RecordingSleep

pytestmark = pytest.mark.usefixtures("collector_paused")

APP = Path(__file__).resolve().parents[2] / "app"


def answering(*replies: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering ``replies`` in turn (the last one again once they run out)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[min(len(seen), len(replies)) - 1]

    return httpx.MockTransport(handler), seen


def test_only_the_core_constructs_http_clients() -> None:
    """No module of ``app/integrations`` outside the core builds its own ``httpx.AsyncClient``
    for the three provider clients."""
    for module in (
        "meta/client.py",
        "sheets/client.py",
        "sheets/service_account.py",
        "serp/client.py",
    ):
        tree = ast.parse((APP / "integrations" / module).read_text())
        built = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AsyncClient"
        ]
        assert not built, f"{module} builds its own httpx.AsyncClient"


@pytest.mark.parametrize(
    "error_type", [MetaError, SheetsError, ProviderError, TransientProviderError, RateLimited]
)
def test_every_provider_error_is_an_outbound_error(error_type: Callable[..., Exception]) -> None:
    assert issubclass(error_type, OutboundError)  # type: ignore[arg-type]


async def test_graph_client_sends_the_user_agent_and_follows_no_redirect() -> None:
    transport, seen = answering(
        httpx.Response(302, headers={"location": "http://169.254.169.254/"}, json={})
    )
    graph = GraphClient("https://graph.example", "v23.0", transport=transport)
    reply = await graph.request("GET", "act_1/campaigns", AccessToken("tok"))
    await graph.aclose()
    assert reply.status == 302  # the redirect is an answer, not followed with the token
    assert len(seen) == 1
    assert seen[0].headers["user-agent"] == USER_AGENT


async def test_graph_transient_errors_retry_on_the_shared_policy_schedule() -> None:
    """AR-12: 3 attempts, 1 s then 2 s; an unreadable 503 and a 429 are transient by the core's
    classification, a 400 with a Graph code is not."""
    transport, seen = answering(
        httpx.Response(503, content=b"<html>busy</html>"),
        httpx.Response(429, content=b"slow down"),
        httpx.Response(200, json={"data": []}),
    )
    graph = GraphClient("https://graph.example", "v23.0", transport=transport)
    sleeps = RecordingSleep()
    reply = await with_retries(lambda: graph.request("GET", "me", AccessToken("tok")), sleep=sleeps)
    await graph.aclose()
    assert reply.status == 200
    assert sleeps.waits == [1.0, 2.0]
    assert len(seen) == 3


async def test_graph_meta_estimate_is_the_cores_retry_after() -> None:
    error = MetaError("throttled", code=80004, transient=True, retry_after_seconds=42)
    assert error.retry_after == 42
    policy = RetryPolicy(schedule=(1.0,), max_wait_seconds=60)
    assert policy.wait_after(1, error.retry_after) == 42


async def test_sheets_client_on_the_core_retries_then_raises_a_classified_error() -> None:
    transport, seen = answering(
        httpx.Response(
            503, json={"error": {"code": 503, "message": "backend", "status": "UNAVAILABLE"}}
        ),
    )
    sleeps = RecordingSleep()
    sheets = SheetsClient(
        "https://sheets.example", retry_delays=(0.25, 1.0), sleep=sleeps, transport=transport
    )
    with pytest.raises(SheetsError) as caught:
        await sheets.get_values("sheet", "A:B", ApiKey("k"))
    await sheets.aclose()
    assert caught.value.transient
    assert caught.value.status == 503
    assert isinstance(caught.value, OutboundError)
    assert caught.value.provider == "google_sheets"
    assert sleeps.waits == [0.25, 1.0]
    assert len(seen) == 3
    assert seen[0].headers["user-agent"] == USER_AGENT


async def test_sheets_permanent_error_is_not_retried() -> None:
    transport, seen = answering(
        httpx.Response(
            403, json={"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}}
        )
    )
    sleeps = RecordingSleep()
    sheets = SheetsClient("https://sheets.example", sleep=sleeps, transport=transport)
    with pytest.raises(SheetsError) as caught:
        await sheets.get_values("sheet", "A:B", ApiKey("k"))
    await sheets.aclose()
    assert not caught.value.transient
    assert (len(seen), sleeps.waits) == (1, [])


async def test_serp_client_is_built_by_the_core() -> None:
    client = SerpClient("https://serp.example", "login", "password")
    http = client._http
    assert http.headers["user-agent"] == USER_AGENT
    assert http.follow_redirects is False
    assert http.trust_env is False
    assert http.timeout.connect == 10.0
    await client.aclose()


async def test_serp_lost_post_is_not_repeatable_for_the_shared_policy() -> None:
    """A task_post whose answer was lost may have created (and billed) the tasks: transient, but
    the shared retry loop must not send it again."""
    lost = TransientProviderError("lost", may_have_succeeded=True)
    assert lost.transient
    assert not lost.repeatable
    calls = 0

    async def post() -> None:
        nonlocal calls
        calls += 1
        raise lost

    sleeps = RecordingSleep()
    with pytest.raises(TransientProviderError):
        await RetryPolicy(schedule=(1.0, 2.0), sleep=sleeps).run(post)
    assert (calls, sleeps.waits) == (1, [])
