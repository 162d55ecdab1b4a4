"""The ``http_request`` action's and webhooks' client: any URL a user typed, without reaching
inside the network.

Before every connection (the first and each redirect) the host is resolved and *every* address it
has is checked by the :class:`~app.integrations.http_guard.address_guard.AddressGuard`; the
request then connects to the address that was checked
— the URL's host is replaced by that IP, with the original name kept in the ``Host`` header and as
the TLS server name — so a name that answers a public address to the check and a private one to the
connection (DNS rebinding) gains nothing. Keep-alive is off, so a connection opened for one name is
never reused for another that happens to share its address, and environment proxies are ignored.

The whole exchange (resolution, connection, redirects, reading the body) runs under one deadline,
and the body is read in chunks and abandoned past ``max_response_bytes``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import msgspec

from app.clock import Clock, SystemClock
from app.integrations.http_guard.address_guard import AddressGuard, parse_url
from app.integrations.http_guard.classify import NOT_SENT, classify_exception, is_transient_status
from app.integrations.http_guard.client import ClientOptions, outbound_client
from app.integrations.http_guard.errors import (
    OutboundError,
    PermanentError,
    ResponseTooLarge,
    TransientError,
)
from app.integrations.http_guard.resolver import Resolver
from app.integrations.http_guard.retry import RetryPolicy, retry_after_seconds
from app.integrations.http_guard.user_agent import USER_AGENT

PROVIDER = "http_request"
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Computed by the client or meaningless once the target is pinned; never taken from the user.
_DROPPED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te"}
)


class HttpRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A request with its merge variables already rendered."""

    method: str
    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: str | None = None


class HttpResult(msgspec.Struct, frozen=True, kw_only=True):
    """What the action stores in the run's context."""

    status: int
    url: str
    """The final URL, after redirects."""
    headers: dict[str, str]
    """Response headers, names lower-cased."""
    body: str
    """The body as text (UTF-8, undecodable bytes replaced)."""
    data: Any = None
    """The body parsed as JSON when it says it is JSON and parses, else ``None``."""


class GuardedHttp:
    """One client for every ``http_request`` of the process.

    Args:
        guard: The address guard (default: one refusing private targets unless a request's
            ``allow_private`` says otherwise).
        resolver: Name resolution for the default guard (default: the operating system's).
        timeout: Seconds for the whole exchange, redirects and body included.
        max_response_bytes: Larger bodies raise :class:`ResponseTooLarge`.
        max_redirects: Redirects followed, each one checked like the first URL.
        policy: In-process retries of transient failures (5xx, 429, timeouts).
    """

    def __init__(
        self,
        *,
        guard: AddressGuard | None = None,
        resolver: Resolver | None = None,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        max_response_bytes: int = 1_000_000,
        max_redirects: int = 3,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.guard = guard or AddressGuard(resolver=resolver)
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.max_redirects = max_redirects
        self.policy = policy or RetryPolicy()
        self._clock: Clock = clock or SystemClock()
        # Pinned connections go to the checked address, so none is kept alive for another name.
        self._client = outbound_client(
            provider=PROVIDER,
            options=ClientOptions(
                timeout_seconds=timeout, max_keepalive_connections=0, user_agent=user_agent
            ),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self, request: HttpRequest, *, allow_private: bool, idempotency_key: str | None = None
    ) -> HttpResult:
        """Send ``request``; a status below 400 is a result, anything else an OutboundError.

        Args:
            allow_private: The workspace's ``allow_private_http`` (the guard's operator setting
                allows private targets for every workspace).
            idempotency_key: Sent as ``Idempotency-Key`` unless the user set that header.
        """
        method = request.method.upper()
        if method not in METHODS:
            raise PermanentError(f"method {request.method!r} is not supported", provider=PROVIDER)
        private = self.guard.permits_private(allow_private)
        return await self.policy.run(
            lambda: self._attempt(method, request, private, idempotency_key)
        )

    async def _attempt(
        self, method: str, request: HttpRequest, allow_private: bool, idempotency_key: str | None
    ) -> HttpResult:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(method, request, allow_private, idempotency_key)
        except TimeoutError as exc:
            raise TransientError(
                f"no complete answer within {self.timeout:g} s", provider=PROVIDER, code="timeout"
            ) from exc

    async def _exchange(
        self, method: str, request: HttpRequest, allow_private: bool, idempotency_key: str | None
    ) -> HttpResult:
        url = parse_url(request.url, provider=PROVIDER)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED_HEADERS}
        if idempotency_key and not any(k.lower() == "idempotency-key" for k in headers):
            headers["Idempotency-Key"] = idempotency_key
        body = request.body.encode() if request.body is not None else None
        for _hop in range(self.max_redirects + 1):
            response, content = await self._send_pinned(method, url, headers, body, allow_private)
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                return self._result(response, url, content)
            next_url = parse_url(str(url.join(location)), provider=PROVIDER)
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method not in ("GET", "HEAD")
            ):
                method, body = "GET", None
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            if (next_url.scheme, next_url.host, next_url.port) != (url.scheme, url.host, url.port):
                # Like browsers and httpx: credentials are for the origin they were written for.
                headers = {
                    k: v
                    for k, v in headers.items()
                    if k.lower() not in ("authorization", "cookie", "proxy-authorization")
                }
            url = next_url
        raise PermanentError(f"more than {self.max_redirects} redirects", provider=PROVIDER)

    async def _send_pinned(
        self,
        method: str,
        url: httpx.URL,
        headers: dict[str, str],
        body: bytes | None,
        allow_private: bool,
    ) -> tuple[httpx.Response, bytes]:
        ip = await self._checked_address(url, allow_private)
        default_port = 443 if url.scheme == "https" else 80
        host = f"[{url.host}]" if ":" in url.host else url.host
        host_header = host if url.port in (None, default_port) else f"{host}:{url.port}"
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        pinned = self._client.build_request(
            method,
            url.copy_with(host=str(ip)),
            headers={**headers, "Host": host_header},
            content=body,
            extensions=extensions,
        )
        try:
            response = await self._client.send(pinned, stream=True)
        except httpx.TransportError as exc:
            failure = classify_exception(exc)
            reason = failure.reason
            if failure.code == NOT_SENT:
                reason = f"could not connect to {url.host} ({type(exc).__name__})"
            error = TransientError if failure.transient else PermanentError
            raise error(reason, provider=PROVIDER, code=failure.code) from exc
        try:
            content = await self._read_limited(response)
        finally:
            await response.aclose()
        self._raise_for_status(response, content)
        return response, content

    async def _checked_address(self, url: httpx.URL, allow_private: bool) -> str:
        port = url.port or (443 if url.scheme == "https" else 80)
        ip = await self.guard.address_for(
            url.host, port, provider=PROVIDER, allow_private=allow_private
        )
        return str(ip)

    async def _read_limited(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_response_bytes:
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self) -> ResponseTooLarge:
        return ResponseTooLarge(
            f"response larger than {self.max_response_bytes} bytes",
            provider=PROVIDER,
            code="response_too_large",
        )

    def _raise_for_status(self, response: httpx.Response, content: bytes) -> None:
        status = response.status_code
        if status < 400:
            return
        excerpt = content[:200].decode("utf-8", "replace")
        error: OutboundError
        if is_transient_status(status):
            error = TransientError(
                f"HTTP {status}: {excerpt}",
                provider=PROVIDER,
                status=status,
                retry_after=retry_after_seconds(response.headers, self._clock.now()),
            )
        else:
            error = PermanentError(f"HTTP {status}: {excerpt}", provider=PROVIDER, status=status)
        raise error

    def _result(self, response: httpx.Response, url: httpx.URL, content: bytes) -> HttpResult:
        data: Any = None
        if "json" in response.headers.get("content-type", ""):
            try:
                data = msgspec.json.decode(content)
            except msgspec.DecodeError:
                data = None
        return HttpResult(
            status=response.status_code,
            url=str(url),
            headers={k.lower(): v for k, v in response.headers.items()},
            body=content.decode("utf-8", "replace"),
            data=data,
        )
