"""The operator's outbound settings reach every outside-API client, PL-15, PL-17: the clients are
found by walking the engines' dependencies as the process wires them (and every provider kind the
funnels know), not from a hand list, so a client added later is covered too. The timeout and the
``User-Agent`` (``OUTBOUND_USER_AGENT``) are read off each client, and the ``User-Agent`` is also
checked where it matters: on the request a simulator receives from each client."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from litestar import Request, get
from litestar.params import FromPath

from app.clock import ManualClock
from app.db.session import Database
from app.engines.funnels.outside.clients import ProviderClients
from app.engines.funnels.outside.config import SHAPES, Provider, parse_options
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.mail.sns import SnsVerifier
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop, simulator_app
from app.settings import Settings
from app.settings_fields import SettingsError
from app.wiring import adrules_deps, assemble, funnels_deps, ranktracking_deps

TIMEOUT = 1.25
"""An ``OUTBOUND_HTTP_TIMEOUT`` no default or literal in the code has."""
AGENT = "Acme-Automation/7.1 (+https://ops.acme.example/bots)"
"""An ``OUTBOUND_USER_AGENT`` that is not the default."""

OWN_SETTING = {
    "webhook_http": "the ad rules' webhook action has its own ADRULES_WEBHOOK_TIMEOUT_SECONDS",
}
"""Attributes holding a client whose timeout is another, more specific setting."""

PER_NODE_KINDS = {"http": "an http_request node sets its own timeout (HttpOptions)"}
"""Provider kinds whose client is configured by the flow's node, not by the operator."""

MINIMAL_OPTIONS = {"sms": {"account_sid": "AC1", "sender": "+15550100"}}


@pytest.fixture
async def tuned_runtime(settings: Settings, shared_db: Database) -> AsyncIterator[Runtime]:
    integrations = dataclasses.replace(
        settings.integrations, http_timeout_seconds=TIMEOUT, user_agent=AGENT
    )
    rt = assemble(
        dataclasses.replace(settings, integrations=integrations),
        ManualClock(datetime(2026, 1, 5, tzinfo=UTC)),
        db=shared_db,
    )
    try:
        yield rt
    finally:
        await rt.stop()
        await rt.resources.aclose()
        await rt.queue.aclose()


def _children(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        yield from ((str(k), v) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        yield from (("[]", v) for v in obj)
    else:
        fields = dict(getattr(obj, "__dict__", {}))
        for cls in type(obj).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(obj, slot):
                    fields[slot] = getattr(obj, slot)
        yield from fields.items()


def _ours(obj: Any) -> bool:
    return type(obj).__module__.startswith("app.") or isinstance(
        obj, dict | list | tuple | set | frozenset
    )


def reachable(root: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every object reachable from ``root`` through the product's own objects and containers,
    with the attribute path that led to it."""
    seen: set[int] = set()
    stack = [(path, root)]
    while stack:
        where, obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield where, obj
        if isinstance(obj, httpx.AsyncClient) or not _ours(obj):
            continue
        stack.extend((f"{where}.{name}", child) for name, child in _children(obj))


def providers(workspace_id: int = 1) -> Iterator[Provider]:
    """One provider of every kind and shape the funnels accept."""
    for kind, shapes in SHAPES.items():
        if kind in PER_NODE_KINDS:
            continue
        for shape in shapes:
            yield Provider(
                workspace_id=workspace_id,
                kind=kind,
                shape=shape,
                base_url=f"https://{kind}.example",
                options=parse_options(kind, MINIMAL_OPTIONS.get(kind)),
                secret="key",
                updated_at=datetime(2026, 1, 5, tzinfo=UTC),
            )


class Found:
    """The outbound clients reachable from the engines' dependencies, by attribute path."""

    def __init__(self) -> None:
        self.clients: dict[str, httpx.AsyncClient] = {}
        self.registries: list[ProviderClients] = []
        self.verifiers: dict[str, SnsVerifier] = {}

    async def aclose(self) -> None:
        for registry in self.registries:
            await registry.aclose()
        for client in self.clients.values():
            await client.aclose()


def discover(runtime: Runtime) -> Found:
    roots = {
        "adrules": adrules_deps(runtime),
        "ranktracking": ranktracking_deps(runtime),
        "funnels": funnels_deps(runtime),
    }
    found = Found()
    for name, root in roots.items():
        for where, obj in reachable(root, name):
            if isinstance(obj, httpx.AsyncClient):
                found.clients[where] = obj
            elif isinstance(obj, ProviderClients):
                found.registries.append(obj)
            elif isinstance(obj, SnsVerifier):
                found.verifiers[where] = obj
    assert found.registries, "the funnels' provider clients were not found"
    for registry in found.registries:
        for provider in providers():
            built = getattr(registry, provider.kind)(provider)
            label = f"funnels.{provider.kind}.{provider.shape}"
            found.clients.update(
                (where, obj)
                for where, obj in reachable(built, label)
                if isinstance(obj, httpx.AsyncClient)
            )
    return found


async def test_one_timeout_setting_reaches_every_outbound_client(
    tuned_runtime: Runtime,
) -> None:
    found = discover(tuned_runtime)
    clients = found.clients
    try:
        checked = {
            where: client
            for where, client in clients.items()
            if not any(f".{attr}" in where for attr in OWN_SETTING)
        }
        # Graph, Sheets, SERP, the alerts' webhook and seven provider shapes at least.
        assert len(checked) >= 11, sorted(checked)
        wrong = {
            where: (client.timeout.read, client.timeout.connect)
            for where, client in checked.items()
            if client.timeout.read != TIMEOUT
        }
        assert not wrong, f"clients that ignore OUTBOUND_HTTP_TIMEOUT: {wrong}"
        no_agent = {
            w: c.headers.get("user-agent")
            for w, c in clients.items()
            if c.headers.get("user-agent") != AGENT
        }
        assert not no_agent, f"clients that ignore OUTBOUND_USER_AGENT: {no_agent}"
        assert all(not c.trust_env for c in clients.values()), "environment proxies trusted"
    finally:
        await found.aclose()


async def test_the_user_agent_setting_arrives_with_every_outbound_request(
    tuned_runtime: Runtime,
) -> None:
    """PL-15: each client found sends one request to a simulator, which records the
    ``User-Agent`` it receives; the SNS verifier builds its client per call, so it is asked for
    one too."""
    received: dict[str, str | None] = {}

    @get("/{label:path}", sync_to_thread=False)
    def record(request: Request[Any, Any, Any], label: FromPath[str]) -> str:
        received[label.strip("/")] = request.headers.get("user-agent")
        return "ok"

    found = discover(tuned_runtime)
    senders = dict(found.clients)
    assert found.verifiers, "the SNS verifier was not found"
    senders.update((where, verifier._client()) for where, verifier in found.verifiers.items())
    try:
        async with serve_in_loop(simulator_app([record])) as url:
            for where, client in senders.items():
                response = await client.get(f"{url}/{where}")
                assert response.status_code == 200, where
        assert set(received) == set(senders), "a request did not arrive"
        wrong = {where: agent for where, agent in received.items() if agent != AGENT}
        assert not wrong, f"requests that arrived without OUTBOUND_USER_AGENT: {wrong}"
    finally:
        await found.aclose()
        for where in found.verifiers:
            await senders[where].aclose()


def test_the_default_user_agent_names_the_product(settings: Settings) -> None:
    assert settings.integrations.user_agent == USER_AGENT
    assert USER_AGENT.startswith("Sweepline/")


@pytest.mark.parametrize("agent", ["", "   ", "Sweepline\r\nX-Injected: 1", "Swéepline/1"])
def test_an_unusable_user_agent_stops_the_process(settings: Settings, agent: str) -> None:
    """PL-15: a value that cannot go in a header is refused when the settings load, naming the
    variable, instead of failing each outbound request later."""
    with pytest.raises(SettingsError, match="OUTBOUND_USER_AGENT"):
        dataclasses.replace(settings.integrations, user_agent=agent)
