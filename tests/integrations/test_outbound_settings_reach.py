"""The operator's outbound settings reach every outside-API client, PL-17: the clients are found
by walking the engines' dependencies as the process wires them (and every provider kind the
funnels know), not from a hand list, so a client added later is covered too."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.db.session import Database
from app.engines.funnels.outside.clients import ProviderClients
from app.engines.funnels.outside.config import SHAPES, Provider, parse_options
from app.integrations.http_guard.user_agent import USER_AGENT
from app.runtime import Runtime
from app.settings import Settings
from app.wiring import adrules_deps, assemble, funnels_deps, ranktracking_deps

TIMEOUT = 1.25
"""An ``OUTBOUND_HTTP_TIMEOUT`` no default or literal in the code has."""

OWN_SETTING = {
    "webhook_http": "the ad rules' webhook action has its own ADRULES_WEBHOOK_TIMEOUT_SECONDS",
}
"""Attributes holding a client whose timeout is another, more specific setting."""

PER_NODE_KINDS = {"http": "an http_request node sets its own timeout (HttpOptions)"}
"""Provider kinds whose client is configured by the flow's node, not by the operator."""

MINIMAL_OPTIONS = {"sms": {"account_sid": "AC1", "sender": "+15550100"}}


@pytest.fixture
async def tuned_runtime(settings: Settings, shared_db: Database) -> AsyncIterator[Runtime]:
    integrations = dataclasses.replace(settings.integrations, http_timeout_seconds=TIMEOUT)
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


async def test_one_timeout_setting_reaches_every_outbound_client(
    tuned_runtime: Runtime,
) -> None:
    roots = {
        "adrules": adrules_deps(tuned_runtime),
        "ranktracking": ranktracking_deps(tuned_runtime),
        "funnels": funnels_deps(tuned_runtime),
    }
    clients: dict[str, httpx.AsyncClient] = {}
    provider_clients: list[ProviderClients] = []
    for name, root in roots.items():
        for where, obj in reachable(root, name):
            if isinstance(obj, httpx.AsyncClient):
                clients[where] = obj
            elif isinstance(obj, ProviderClients):
                provider_clients.append(obj)
    assert provider_clients, "the funnels' provider clients were not found"
    for registry in provider_clients:
        for provider in providers():
            built = getattr(registry, provider.kind)(provider)
            label = f"funnels.{provider.kind}.{provider.shape}"
            clients.update(
                (where, obj)
                for where, obj in reachable(built, label)
                if isinstance(obj, httpx.AsyncClient)
            )
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
        no_agent = [w for w, c in clients.items() if c.headers.get("user-agent") != USER_AGENT]
        assert not no_agent, f"clients without the product's User-Agent: {no_agent}"
        assert all(not c.trust_env for c in clients.values()), "environment proxies trusted"
    finally:
        for registry in provider_clients:
            await registry.aclose()
        for client in clients.values():
            await client.aclose()
