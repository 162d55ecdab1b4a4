"""The transport every Graph call goes through: versioned URLs, the token in a header, one pooled
client from the shared outbound core (:func:`~app.integrations.http_guard.outbound_client`),
errors turned into :class:`~.errors.MetaError` (an
:class:`~app.integrations.http_guard.OutboundError`) and usage headers kept.

A :class:`GraphClient` does one attempt per call; retry policy belongs to the caller
(:mod:`.retry`), because the dispatcher's schedule (3 attempts, 1 s then 2 s) is a product rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from app.integrations.http_guard import ClientOptions, outbound_client
from app.integrations.http_guard.classify import TIMEOUT, UNSENDABLE, classify_exception
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.meta.errors import MetaError, error_from_response
from app.integrations.meta.usage import Usage, parse_usage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A Meta access token. Its ``repr`` hides it, so it cannot leak through a log or traceback."""

    value: str

    def __repr__(self) -> str:
        return "AccessToken(***)"

    def __str__(self) -> str:
        return "***"


@dataclass(frozen=True, slots=True)
class GraphReply:
    status: int
    content: bytes
    usage: Usage


class GraphClient:
    """Shared by every reader and writer of a process (``ctx.resources``); ``aclose()`` at exit."""

    def __init__(
        self,
        base_url: str,
        version: str,
        *,
        timeout_seconds: float = 30.0,
        user_agent: str = USER_AGENT,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.version = version.strip("/")
        # The Graph URL is the operator's setting, never a workspace's: no address guard.
        self._http = outbound_client(
            provider="meta",
            options=ClientOptions(
                timeout_seconds=timeout_seconds,
                max_connections=max_connections,
                user_agent=user_agent,
            ),
            transport=transport,
        )
        self.last_usage = Usage()

    def url(self, path: str) -> str:
        return f"{self.base_url}/{self.version}/{path.lstrip('/')}"

    async def request(
        self,
        method: str,
        path: str,
        token: AccessToken | None,
        *,
        params: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        versioned: bool = True,
    ) -> GraphReply:
        """One call. Raises :class:`MetaError` (transient for timeouts, network errors, 5xx and
        Meta's temporary codes). ``versioned=False`` posts to the root (batch requests, whose
        sub-requests carry the version). ``token`` None: the call authenticates otherwise (the
        code exchange carries the app's id and secret)."""
        url = self.url(path) if versioned else f"{self.base_url}/"
        return await self._send(method, url, token, params=params, data=data, label=path)

    async def get_url(self, url: str, token: AccessToken) -> GraphReply:
        """GET a URL exactly as Meta returned it (a page's ``paging.next``: it carries the cursor
        and the whole query). Only URLs on this client's own Graph host are followed, so the token
        never travels to a host named by a reply."""
        if not self.owns(url):
            raise MetaError(
                "a paging link points outside the Graph API host; it was not followed",
                transient=False,
            )
        return await self._send("GET", url, token, params=None, data=None, label="paging.next")

    def owns(self, url: str) -> bool:
        """Whether ``url`` is on this client's Graph API origin (scheme, host and port)."""
        mine, theirs = urlsplit(self.base_url), urlsplit(url)
        return (mine.scheme, mine.netloc) == (theirs.scheme, theirs.netloc) and bool(theirs.path)

    async def _send(
        self,
        method: str,
        url: str,
        token: AccessToken | None,
        *,
        params: dict[str, Any] | None,
        data: dict[str, Any] | None,
        label: str,
    ) -> GraphReply:
        path = label
        headers = {"Authorization": f"Bearer {token.value}"} if token is not None else {}
        try:
            response = await self._http.request(
                method, url, params=params, data=data, headers=headers
            )
        except UnicodeEncodeError:
            raise MetaError(
                "the request could not be sent (the access token is not ASCII)", transient=False
            ) from None
        except httpx.TransportError as exc:
            raise _transport_error(exc) from None
        usage = parse_usage(response.headers)
        self.last_usage = usage
        if response.status_code >= 400:
            wait = usage.regain_access_seconds or None
            error = error_from_response(
                response.status_code, response.content, retry_after_seconds=wait
            )
            log.info("graph call failed: %s %s: %s", method, path, error.describe())
            raise error
        return GraphReply(response.status_code, response.content, usage)

    async def aclose(self) -> None:
        await self._http.aclose()


def _transport_error(exc: httpx.TransportError) -> MetaError:
    """A failure instead of a Graph reply, classified by the one outbound classifier."""
    failure = classify_exception(exc)
    if failure.code == UNSENDABLE:
        message = (
            "the request could not be sent (the access token holds characters a header "
            "cannot carry)"
        )
    elif failure.code == TIMEOUT:
        message = f"the Graph API did not answer in time ({type(exc).__name__})"
    else:
        message = f"could not reach the Graph API ({type(exc).__name__})"
    return MetaError(message, transient=failure.transient)
