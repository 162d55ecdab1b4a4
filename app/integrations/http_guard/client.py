"""The one factory of ``httpx.AsyncClient`` s for outside APIs.

Every client gets the same defaults: a timeout, bounded connection limits, the operator's
``User-Agent`` (``OUTBOUND_USER_AGENT``), no environment proxies (credentials must not leave through a proxy someone set in
the environment) and no automatic redirects (a redirect is an answer to classify, not to follow
with the credentials attached). With an :class:`AddressGuard` every connection is checked and
pinned — for any URL a user or a workspace set. No request leaves from a queue job that lost its
lease (:mod:`app.scheduling.outside_calls`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

import httpx

from app.integrations.http_guard import log_redaction
from app.integrations.http_guard.address_guard import AddressGuard
from app.integrations.http_guard.tls import tls_context
from app.integrations.http_guard.tracing import TracedClient
from app.integrations.http_guard.user_agent import USER_AGENT
from app.scheduling.outside_calls import check_outside_call
from app.settings import IntegrationSettings


@dataclass(frozen=True, slots=True)
class ClientOptions:
    timeout_seconds: float = 30.0
    """Connecting, and each read or write."""
    max_connections: int = 100
    max_keepalive_connections: int | None = None
    """Idle connections kept open (``None``: ``max_connections``; ``0`` when every connection
    must be opened afresh, as the pinned connections of :class:`GuardedHttp`)."""
    connect_timeout_seconds: float | None = None
    """A shorter limit for connecting, when an unreachable host should fail sooner than a slow
    answer (``None``: ``timeout_seconds``)."""
    user_agent: str = USER_AGENT
    """The ``User-Agent`` header (``OUTBOUND_USER_AGENT``)."""

    @classmethod
    def from_settings(cls, settings: IntegrationSettings) -> ClientOptions:
        return cls(
            timeout_seconds=settings.http_timeout_seconds,
            max_connections=settings.http_max_connections,
            user_agent=settings.user_agent,
        )


T = TypeVar("T")

GUARD_RESOURCE = "integrations.address_guard"
"""Key of the process's one :class:`AddressGuard` among its shared resources (tests put their
own, e.g. with a :class:`~app.integrations.http_guard.resolver.StaticResolver`)."""


class SharedObjects(Protocol):
    def get(self, key: str, factory: Callable[[], T]) -> T: ...


def address_guard(settings: IntegrationSettings) -> AddressGuard:
    """The guard of user- and workspace-set URLs, as the operator configured it."""
    return AddressGuard(allow_private=settings.allow_private_targets)


def shared_guard(resources: SharedObjects, settings: IntegrationSettings) -> AddressGuard:
    """The process's guard (built once from settings, kept in its shared resources)."""
    return resources.get(GUARD_RESOURCE, lambda: address_guard(settings))


def outbound_client(
    *,
    provider: str,
    options: ClientOptions | None = None,
    base_url: str = "",
    headers: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    guard: AddressGuard | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """A client for one outside API.

    Args:
        provider: Name used in errors raised by the guard.
        guard: Check and pin every connection (required for user- or workspace-set URLs).
        transport: Tests of a client alone may pass an ``httpx.MockTransport``; it replaces the
            guard's transport, so never pass both outside tests.
    """
    log_redaction.install()
    options = options or ClientOptions()
    limits = httpx.Limits(
        max_connections=options.max_connections,
        max_keepalive_connections=(
            options.max_connections
            if options.max_keepalive_connections is None
            else options.max_keepalive_connections
        ),
    )
    if transport is None and guard is not None:
        transport = guard.transport(provider=provider, limits=limits)
    return TracedClient(
        provider=provider,
        base_url=base_url,
        headers={"User-Agent": options.user_agent, **dict(headers or {})},
        auth=auth,
        timeout=httpx.Timeout(
            options.timeout_seconds,
            connect=options.connect_timeout_seconds or options.timeout_seconds,
        ),
        limits=limits,
        follow_redirects=False,
        trust_env=False,
        verify=tls_context(),
        transport=transport,
        event_hooks={"request": [refuse_after_lost_lease]},
    )


async def refuse_after_lost_lease(request: httpx.Request) -> None:
    """Request hook of every outbound client: a queue job that lost its lease makes no further
    outside call (the job that took it over makes it instead)."""
    check_outside_call()
