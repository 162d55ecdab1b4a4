"""The address guard: where a URL a user or a workspace set may connect, checked twice.

* At configuration (:meth:`AddressGuard.check_url`): a provider base URL, a webhook or a postback
  target is refused before it is stored when it is not http(s), or when its host — an IP literal
  in any encoding, or a name and every address it resolves to — is private, loopback, link-local,
  a cloud metadata endpoint or otherwise not public. A name that does not resolve yet is accepted:
  it can reach nothing now, and the second check stands guard when it does.
* At connection (:class:`GuardedTransport`): every TCP connection an ``httpx`` client opens — the
  first and after each redirect — resolves the host again, checks every address, and connects to
  the address that passed (pinned: the socket goes to that IP while TLS still verifies the name).
  A name that answers a public address to the first check and a private one later (DNS
  rebinding) gains nothing.

Private targets are allowed only by the operator (``OUTBOUND_ALLOW_PRIVATE``; tests and the demo
turn it on for their loopback simulators). The unspecified address, multicast and metadata
endpoints are refused whatever the setting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from app.integrations.http_guard.addresses import IPAddress, parse_ip, refusal_reason
from app.integrations.http_guard.errors import PermanentError, TargetRefused, TransientError
from app.integrations.http_guard.resolver import Resolver, SystemResolver
from app.integrations.http_guard.tls import tls_context

RESOLVE_AT_CONFIGURATION_SECONDS = 3.0
"""A configuration request does not wait longer than this for a name to resolve."""


class AddressGuard:
    """Decides whether a host may be connected to, and to which of its addresses.

    Args:
        allow_private: The operator's ``OUTBOUND_ALLOW_PRIVATE``.
        resolver: Name resolution (default: the operating system's); tests pass a
            :class:`~app.integrations.http_guard.resolver.StaticResolver`.
    """

    def __init__(self, *, allow_private: bool = False, resolver: Resolver | None = None) -> None:
        self.allow_private = allow_private
        self.resolver: Resolver = resolver or SystemResolver()

    def permits_private(self, workspace_allows: bool = False) -> bool:
        return self.allow_private or workspace_allows

    async def check_url(
        self, url: str, *, provider: str, allow_private: bool | None = None
    ) -> None:
        """Refuse ``url`` at configuration time: raises :class:`TargetRefused`, or a
        :class:`PermanentError` with code ``invalid_url``."""
        parsed = parse_url(url, provider=provider)
        private = self.allow_private if allow_private is None else allow_private
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        literal = parse_ip(parsed.host)
        if literal is not None:
            self._judge(parsed.host, [literal], private, provider)
            return
        try:
            async with asyncio.timeout(RESOLVE_AT_CONFIGURATION_SECONDS):
                addresses = await self.resolver.resolve(parsed.host, port)
        except (OSError, TimeoutError):
            return  # checked again at every connection
        self._judge(parsed.host, addresses, private, provider)

    async def address_for(
        self, host: str, port: int, *, provider: str, allow_private: bool | None = None
    ) -> IPAddress:
        """The checked address to connect to for ``host`` (connection time)."""
        private = self.allow_private if allow_private is None else allow_private
        literal = parse_ip(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = await self.resolver.resolve(host, port)
            except OSError as exc:
                raise TransientError(
                    f"could not resolve {host} ({exc})", provider=provider, code="not_sent"
                ) from exc
            if not addresses:
                raise PermanentError(
                    f"host {host} does not exist", provider=provider, code="unknown_host"
                )
        self._judge(host, addresses, private, provider)
        return addresses[0]

    def transport(
        self,
        *,
        provider: str,
        limits: httpx.Limits | None = None,
        allow_private: bool | None = None,
    ) -> GuardedTransport:
        """An ``httpx`` transport whose every connection passes this guard."""
        return GuardedTransport(
            self,
            provider=provider,
            limits=limits or httpx.Limits(),
            allow_private=self.allow_private if allow_private is None else allow_private,
        )

    @staticmethod
    def _judge(host: str, addresses: Iterable[IPAddress], private: bool, provider: str) -> None:
        # Every address must pass: a connection could otherwise land on the refused one.
        for ip in addresses:
            reason = refusal_reason(ip, allow_private=private)
            if reason is not None:
                where = host if parse_ip(host) is not None else f"{host} resolves to {ip}, which"
                raise TargetRefused(
                    f"{where} is a {reason}; requests to private or local targets are not allowed",
                    provider=provider,
                    code="target_refused",
                )


def parse_url(raw: str, *, provider: str) -> httpx.URL:
    """``raw`` as an absolute http(s) URL with a host, or an ``invalid_url`` error."""
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError) as exc:
        raise PermanentError(f"invalid URL ({exc})", provider=provider, code="invalid_url") from exc
    if url.scheme not in ("http", "https"):
        raise PermanentError(
            f"only http and https URLs are allowed, not {url.scheme or 'none'!r}",
            provider=provider,
            code="invalid_url",
        )
    if not url.host:
        raise PermanentError("the URL has no host", provider=provider, code="invalid_url")
    return url


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the guard in front of every TCP connection."""

    def __init__(self, guard: AddressGuard, provider: str, allow_private: bool) -> None:
        self._guard = guard
        self._provider = provider
        self._allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        ip = await self._guard.address_for(
            host, port, provider=self._provider, allow_private=self._allow_private
        )
        # TLS is started later on this stream with the URL's host name as server name, so the
        # certificate is still verified against the name while the socket goes to the checked IP.
        return await self._inner.connect_tcp(
            str(ip),
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("unix sockets are not allowed", provider=self._provider)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` whose connections go through :class:`AddressGuard`.

    Connections are pooled per host name, so keep-alive works as usual; a pooled connection was
    checked when it was opened and stays on the address that was checked. Environment proxies are
    never used (a proxy would make the address check meaningless).
    """

    def __init__(
        self,
        guard: AddressGuard,
        *,
        provider: str,
        limits: httpx.Limits,
        allow_private: bool,
    ) -> None:
        super().__init__(trust_env=False, limits=limits, verify=tls_context())
        # httpx builds its connection pool without a way to pass a network backend; the pool it
        # built is replaced by the same pool with the guarded backend (httpx's documented pool
        # arguments, nothing else changed).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(guard, provider, allow_private),
        )
