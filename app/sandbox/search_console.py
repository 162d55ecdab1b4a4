"""A loopback simulator of the Google Search Console API (``webmasters/v3``), for the subset the
product uses, in Google's documented shapes:

- ``GET /webmasters/v3/sites`` (``sites.list``): ``{"siteEntry": [{"siteUrl", "permissionLevel"}]}``
  (an account with no property answers ``{}``, without the key);
- ``POST /webmasters/v3/sites/{siteUrl}/searchAnalytics/query`` (``searchanalytics.query``), the
  site URL percent-encoded in the path (``https%3A%2F%2Fwww.example.com%2F`` or
  ``sc-domain%3Aexample.com``); a body with ``startDate`` and ``endDate`` (``YYYY-MM-DD``, both
  required), ``dimensions`` (``date``, ``query``, ``page``, ``country``, ``device``,
  ``searchAppearance``), ``rowLimit`` (1 to 25,000, default 1,000), ``startRow`` (zero-based,
  default 0), ``dataState`` (``final`` default, or ``all`` which adds the fresh, still partial
  days), ``type``/``searchType`` and ``aggregationType``; the answer is
  ``{"rows": [{"keys": [...], "clicks", "impressions", "ctr", "position"}],
  "responseAggregationType": "byProperty"}``, rows sorted by clicks descending, and without the
  ``rows`` key when there is none (past the last row, or no data).

Authentication is an OAuth bearer token minted by the Google token endpoint of
:class:`~app.sandbox.sheets.SheetsSandbox` (the same service-account flow as Sheets) with the
``webmasters`` scope; a missing or unknown token answers Google's 401 ``UNAUTHENTICATED``, a token
of another scope 403 ``PERMISSION_DENIED``, a property the account cannot see 403, a bad body 400
``INVALID_ARGUMENT`` — all in the error shape ``{"error": {"code", "message", "status"}}``. Calls
are counted as ``sites.list`` and ``searchanalytics.query``; faults are injected through
:class:`~app.sandbox.base.SandboxState` (garbage bodies, delays longer than the client's timeout).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import msgspec
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)
from app.sandbox.sheets import SheetsSandbox, token_route

DEFAULT_ROW_LIMIT = 1000
MAX_ROW_LIMIT = 25_000
DIMENSIONS = ("date", "query", "page", "country", "device", "searchAppearance")
PERMISSION_LEVELS = ("siteOwner", "siteFullUser", "siteRestrictedUser", "siteUnverifiedUser")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class QueryRow:
    """One query's figures over a day of a property (``fresh``: part of the still partial data
    ``dataState: all`` adds)."""

    query: str
    date: str
    clicks: int
    impressions: int
    position: float
    fresh: bool = False


@dataclass
class SearchConsoleSandbox(HttpSimulator):
    """The simulator's data: properties by site URL, each with its permission level and its
    per-day query rows; ``google`` is the token endpoint whose tokens it accepts."""

    google: SheetsSandbox = field(default_factory=SheetsSandbox)
    state: SandboxState = field(default_factory=SandboxState)
    properties: dict[str, str] = field(default_factory=dict)
    """Site URL → permission level."""
    rows: dict[str, list[QueryRow]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset_data(self) -> None:
        with self._lock:
            self.properties.clear()
            self.rows.clear()

    def create_app(self) -> Litestar:
        return create_search_console_app(self)

    def add_property(self, site_url: str, permission_level: str = "siteOwner") -> None:
        with self._lock:
            self.properties[site_url] = permission_level
            self.rows.setdefault(site_url, [])

    def add_rows(self, site_url: str, rows: list[QueryRow]) -> None:
        with self._lock:
            self.rows.setdefault(site_url, []).extend(rows)

    def query(self, site_url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of a (validated) query body, grouped by its dimensions, sorted by clicks."""
        dims: list[str] = body.get("dimensions") or []
        start, end = body["startDate"], body["endDate"]
        with_fresh = body.get("dataState", "final").lower() == "all"
        groups: dict[tuple[str, ...], list[QueryRow]] = {}
        with self._lock:
            stored = list(self.rows.get(site_url, []))
        for row in stored:
            if not start <= row.date <= end or (row.fresh and not with_fresh):
                continue
            key = tuple(row.query if d == "query" else row.date for d in dims)
            groups.setdefault(key, []).append(row)
        out: list[dict[str, Any]] = []
        for key, members in groups.items():
            clicks = sum(r.clicks for r in members)
            impressions = sum(r.impressions for r in members)
            # Average position weighted by impressions, as the Performance report computes it.
            position = (
                sum(r.position * r.impressions for r in members) / impressions
                if impressions
                else 0.0
            )
            out.append(
                {
                    "keys": list(key),
                    "clicks": float(clicks),
                    "impressions": float(impressions),
                    "ctr": clicks / impressions if impressions else 0.0,
                    "position": position,
                }
            )
        # Clicks descending; ties in a stable order (Google's is arbitrary).
        out.sort(key=lambda r: (-r["clicks"], -r["impressions"], r["keys"]))
        return out


def _error(status: int, google_status: str, message: str) -> Response[bytes]:
    body = {"error": {"code": status, "message": message, "status": google_status}}
    return Response(_encoder.encode(body), status_code=status, media_type=MediaType.JSON)


def _credentials_error(
    sandbox: SearchConsoleSandbox, request: Request[Any, Any, Any]
) -> Response[bytes] | None:
    auth = request.headers.get("authorization", "")
    if not auth.lower().startswith("bearer "):
        return _error(
            401,
            "UNAUTHENTICATED",
            "Request is missing required authentication credential.",
        )
    scope = sandbox.google.token_scopes.get(auth[7:].strip())
    if scope is None:
        return _error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
    if "webmasters" not in scope:
        return _error(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.")
    return None


def _invalid_body(body: Any) -> str | None:
    """Google's 400 message for a query body it refuses, or None."""
    if not isinstance(body, dict):
        return "Invalid JSON payload received."
    for name in ("startDate", "endDate"):
        value = body.get(name)
        if value is None:
            return f"Missing required field: {name}"
        if not isinstance(value, str) or not _DATE.match(value):
            return f"Invalid value at '{name}'"
    if body["startDate"] > body["endDate"]:
        return "startDate must be earlier than or equal to endDate."
    dims = body.get("dimensions", [])
    if not isinstance(dims, list) or any(d not in DIMENSIONS for d in dims):
        return "Invalid value at 'dimensions'"
    row_limit = body.get("rowLimit", DEFAULT_ROW_LIMIT)
    if not isinstance(row_limit, int) or not 1 <= row_limit <= MAX_ROW_LIMIT:
        return f"rowLimit must be between 1 and {MAX_ROW_LIMIT}."
    start_row = body.get("startRow", 0)
    if not isinstance(start_row, int) or start_row < 0:
        return "startRow must be a non-negative number."
    if str(body.get("dataState", "final")).lower() not in ("final", "all"):
        return "Invalid value at 'dataState'"
    return None


def create_search_console_app(
    sandbox: SearchConsoleSandbox, *, token_endpoint: bool = False
) -> Litestar:
    """The simulator's app; with ``token_endpoint``, Google's token endpoint of
    ``sandbox.google`` is served on the same port (``POST /token``), so one server is all the
    demo points its Google settings at."""

    @get("/webmasters/v3/sites")
    async def sites_list(request: Request[Any, Any, Any]) -> Response[Any]:
        fault = sandbox.state.hit("sites.list")
        if fault is not None:
            return await fault_response(fault)
        if (refused := _credentials_error(sandbox, request)) is not None:
            return refused
        with sandbox._lock:
            entries = [
                {"siteUrl": url, "permissionLevel": level}
                for url, level in sorted(sandbox.properties.items())
            ]
        body = {"siteEntry": entries} if entries else {}
        return Response(_encoder.encode(body), media_type=MediaType.JSON)

    @post("/webmasters/v3/sites/{site:path}", status_code=200)
    async def searchanalytics_query(
        request: Request[Any, Any, Any], site: FromPath[str]
    ) -> Response[Any]:
        # The site URL is one percent-encoded path segment followed by /searchAnalytics/query;
        # read from the raw path, as the decoded one has the URL's own slashes in it.
        raw = bytes(request.scope.get("raw_path") or site.encode()).decode()
        encoded, _, method = raw.split("/webmasters/v3/sites/", 1)[-1].partition("/")
        site_url = unquote(encoded)
        fault = sandbox.state.hit("searchanalytics.query", site=site_url)
        if fault is not None:
            return await fault_response(fault)
        if method != "searchAnalytics/query":
            return _error(404, "NOT_FOUND", "Method not found.")
        if (refused := _credentials_error(sandbox, request)) is not None:
            return refused
        if site_url not in sandbox.properties:
            return _error(
                403,
                "PERMISSION_DENIED",
                f"User does not have sufficient permission for site '{site_url}'.",
            )
        try:
            body = msgspec.json.decode(await request.body())
        except msgspec.DecodeError:
            body = None
        if (problem := _invalid_body(body)) is not None:
            return _error(400, "INVALID_ARGUMENT", problem)
        rows = sandbox.query(site_url, body)
        start = body.get("startRow", 0)
        page = rows[start : start + body.get("rowLimit", DEFAULT_ROW_LIMIT)]
        out: dict[str, Any] = {"responseAggregationType": "byProperty"}
        if page:
            out["rows"] = page
        return Response(_encoder.encode(out), media_type=MediaType.JSON)

    extra = [token_route(sandbox.google)] if token_endpoint else []
    return simulator_app([sites_list, searchanalytics_query, *extra])


def start_search_console_sandbox(
    sandbox: SearchConsoleSandbox | None = None, *, token_endpoint: bool = False
) -> ThreadedServer:
    """Run the simulator on a free loopback port in its own thread (demo, benchmarks); with
    ``token_endpoint``, Google's token endpoint answers on the same port."""
    sandbox = sandbox or SearchConsoleSandbox()
    if not token_endpoint:
        return start_simulator(sandbox)
    server = ThreadedServer(create_search_console_app(sandbox, token_endpoint=True))
    sandbox.url = sandbox.google.url = server.url
    return server.start()
