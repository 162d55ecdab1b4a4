"""A read-only client of the Google Search Console API (``webmasters/v3``).

Two calls: ``GET /webmasters/v3/sites`` (``sites.list``: the properties the credentials can see)
and ``POST /webmasters/v3/sites/{siteUrl}/searchAnalytics/query`` (``searchanalytics.query``),
the site URL percent-encoded as one path segment. Queries are read by the ``query`` dimension,
``rowLimit`` rows a page (Google allows up to 25,000, default 1,000), following ``startRow``
until a page comes back shorter than the limit (or without ``rows`` at all, Google's answer past
the last row), or ``max_rows`` are read. Rows arrive sorted by clicks, so a cut keeps the best.

Credentials are an OAuth bearer token: a service account's, minted with the read-only Search
Console scope by the same :class:`~app.integrations.sheets.TokenMinter` as Sheets (one key, one
token cache). Transient failures (429, 5xx, connection errors, timeouts) are retried a few times
under the shared :class:`~app.integrations.http_guard.RetryPolicy`; everything else raises
:class:`SearchConsoleError` at once. Everything the API answers is decoded into structs; another
shape is an error naming what was wrong, never a partial list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import date
from urllib.parse import quote

import httpx
import msgspec

from app.integrations.http_guard import (
    ClientOptions,
    OutboundError,
    RetryPolicy,
    classify_exception,
    is_transient_status,
    outbound_client,
)
from app.integrations.http_guard.classify import TIMEOUT
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.sheets import BearerToken, SheetsError
from app.integrations.sheets.client import TokenSource

PROVIDER = "google_search_console"
SCOPE = "https://www.googleapis.com/auth/webmasters.readonly"
"""The read-only Search Console scope the service account's tokens are minted for."""
MAX_ROW_LIMIT = 25_000
PAGE_ROWS = 1_000
"""Google's default page: a preview of a few thousand queries reads a few small answers (one
slow page costs one page's retry, not the whole read)."""
DATA_STATES = ("final", "all")

Sleep = Callable[[float], Awaitable[None]]
Credentials = BearerToken | TokenSource


class SearchConsoleError(OutboundError):
    """The Search Console API (or Google's token endpoint) refused or failed the read."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message, provider=PROVIDER, status=status)
        self.transient = transient

    def __str__(self) -> str:
        return self.message


class Property(msgspec.Struct, frozen=True, rename="camel"):
    """A Search Console property: ``https://www.example.com/`` or ``sc-domain:example.com``."""

    site_url: str
    permission_level: str = ""


class QueryRow(msgspec.Struct, frozen=True):
    """One search query's figures over the date range (``ctr`` a fraction, ``position`` the
    average position, 1 the top)."""

    keys: list[str]
    clicks: float
    impressions: float
    ctr: float
    position: float


class _Sites(msgspec.Struct):
    siteEntry: list[Property] = []


class _QueryReply(msgspec.Struct):
    rows: list[QueryRow] = []
    responseAggregationType: str = ""


class _ErrorDetail(msgspec.Struct):
    code: int = 0
    message: str = ""
    status: str = ""


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


def _error_from(response: httpx.Response) -> SearchConsoleError:
    message = f"HTTP {response.status_code}"
    try:
        detail = msgspec.json.decode(response.content, type=_ErrorBody).error
        message = f"{detail.status or response.status_code}: {detail.message}"
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    return SearchConsoleError(
        message,
        status=response.status_code,
        transient=is_transient_status(response.status_code),
    )


class SearchConsoleClient:
    """One shared HTTP client for the Search Console API; close it with :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float = 30.0,
        user_agent: str = USER_AGENT,
        retry_delays: Sequence[float] = (0.25, 1.0),
        sleep: Sleep = asyncio.sleep,
        page_rows: int = PAGE_ROWS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not 1 <= page_rows <= MAX_ROW_LIMIT:
            raise ValueError(f"page_rows must be 1 to {MAX_ROW_LIMIT}")
        self._http = outbound_client(
            provider=PROVIDER,
            options=ClientOptions(timeout_seconds=timeout_seconds, user_agent=user_agent),
            base_url=base_url.rstrip("/"),
            transport=transport,
        )
        self._policy = RetryPolicy(schedule=tuple(retry_delays), sleep=sleep)
        self.page_rows = page_rows

    async def _headers(self, credentials: Credentials) -> dict[str, str]:
        if not isinstance(credentials, BearerToken):
            try:
                credentials = await credentials.bearer()
            except SheetsError as exc:  # the shared minter speaks for Sheets; say who asked
                raise SearchConsoleError(
                    exc.message, status=exc.status, transient=exc.transient
                ) from None
        return {"Authorization": f"Bearer {credentials.token}"}

    async def _call(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None = None
    ) -> bytes:
        async def once() -> bytes:
            try:
                response = await self._http.request(
                    method,
                    path,
                    headers={**headers, "Content-Type": "application/json"} if body else headers,
                    content=body,
                )
            except httpx.TransportError as exc:
                failure = classify_exception(exc)
                message = (
                    "the Search Console API did not answer in time"
                    if failure.code == TIMEOUT
                    else f"could not reach the Search Console API: {exc!r}"
                )
                raise SearchConsoleError(message, transient=failure.transient) from None
            if response.status_code != 200:
                raise _error_from(response)
            return response.content

        return await self._policy.run(once)

    async def sites(self, credentials: Credentials) -> list[Property]:
        """The properties the credentials can read, by site URL."""
        raw = await self._call("GET", "/webmasters/v3/sites", await self._headers(credentials))
        try:
            reply = msgspec.json.decode(raw, type=_Sites)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SearchConsoleError(
                f"the Search Console API answered an unexpected list of sites: {exc}"
            ) from None
        return sorted(reply.siteEntry, key=lambda p: p.site_url)

    async def queries(
        self,
        site_url: str,
        *,
        start: date,
        end: date,
        credentials: Credentials,
        data_state: str = "final",
        max_rows: int = MAX_ROW_LIMIT,
    ) -> list[QueryRow]:
        """The property's search queries over ``start``..``end`` (inclusive), most clicked first,
        at most ``max_rows`` of them, read page by page."""
        headers = await self._headers(credentials)
        path = f"/webmasters/v3/sites/{quote(site_url, safe='')}/searchAnalytics/query"
        rows: list[QueryRow] = []
        while len(rows) < max_rows:
            limit = min(self.page_rows, max_rows - len(rows))
            body = msgspec.json.encode(
                {
                    "startDate": start.isoformat(),
                    "endDate": end.isoformat(),
                    "dimensions": ["query"],
                    "type": "web",
                    "dataState": data_state,
                    "rowLimit": limit,
                    "startRow": len(rows),
                }
            )
            raw = await self._call("POST", path, headers, body)
            try:
                page = msgspec.json.decode(raw, type=_QueryReply).rows
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise SearchConsoleError(
                    f"the Search Console API answered rows of an unexpected shape: {exc}"
                ) from None
            if any(len(row.keys) != 1 for row in page):
                raise SearchConsoleError("the Search Console API answered rows without one query")
            rows.extend(page)
            if len(page) < limit:
                break
        return rows

    async def aclose(self) -> None:
        await self._http.aclose()
