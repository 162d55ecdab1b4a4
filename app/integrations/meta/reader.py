""":class:`MetaReader`: every call it can make reads. It holds no method that sends a write, and the
batch requests it builds are made of GETs only — the ad-rules dispatcher is given this class and
nothing else (spec AR-19).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

import msgspec

from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.structs import (
    AD_ACCOUNT_FIELDS,
    CAMPAIGN_FIELDS,
    BatchReply,
    GraphAdAccount,
    GraphCampaign,
    Page,
)

T = TypeVar("T")

PAGE_SIZE = 1000
"""Campaigns requested per page (spec AR-12)."""
MAX_BATCH = 50
"""The Graph API's limit of sub-requests in one batch call."""
MAX_PAGES = 1_000
"""A guard against paging that never ends (a million campaigns at 1,000 a page)."""

_campaign_page = msgspec.json.Decoder(Page[GraphCampaign])
_account_page = msgspec.json.Decoder(Page[GraphAdAccount])
_campaign = msgspec.json.Decoder(GraphCampaign)
_batch = msgspec.json.Decoder(list[BatchReply | None])


@dataclass(frozen=True, slots=True)
class BatchGet:
    """One GET sub-request of a batch: a path under the version and its query parameters."""

    path: str
    params: dict[str, Any]


def _decode(decoder: msgspec.json.Decoder[Any], content: bytes, what: str) -> Any:
    """Decode a 2xx reply. JSON of the wrong shape is a permanent error; a body that is not JSON
    at all (an HTML error page from a proxy or an overloaded edge, answered with 200) is
    transient: the same request usually succeeds a moment later."""
    try:
        return decoder.decode(content)
    except msgspec.ValidationError as exc:
        raise decode_error(what, exc) from None
    except msgspec.DecodeError:
        snippet = content[:120].decode("utf-8", "replace").strip() or "empty body"
        raise MetaError(
            f"the Graph API answered 200 with a body that is not JSON ({what}): {snippet!r}",
            transient=True,
        ) from None


def _query(params: dict[str, Any]) -> dict[str, str]:
    """Graph query values: lists become comma-joined, structures JSON."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = ",".join(value)
        elif isinstance(value, list | tuple | dict):
            out[key] = msgspec.json.encode(value).decode()
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


class MetaReader:
    """Read-only Graph API calls made with one access token."""

    def __init__(self, graph: GraphClient, token: str | AccessToken) -> None:
        self.graph = graph
        self._token = token if isinstance(token, AccessToken) else AccessToken(token)

    def __repr__(self) -> str:
        return f"MetaReader({self.graph.base_url}, token=***)"

    async def _get(self, path: str, params: dict[str, Any]) -> bytes:
        reply = await self.graph.request("GET", path, self._token, params=_query(params))
        return reply.content

    async def ad_accounts(self, *, page_size: int = 100) -> list[GraphAdAccount]:
        """Every ad account the token can reach (``/me/adaccounts``, all pages)."""
        accounts: list[GraphAdAccount] = []
        params: dict[str, Any] = {"fields": list(AD_ACCOUNT_FIELDS), "limit": page_size}
        page: Page[GraphAdAccount] = _decode(
            _account_page, await self._get("me/adaccounts", params), "ad account list"
        )
        follow = PageTrail("ad account list")
        while True:
            accounts.extend(page.data)
            url = follow.next_url(page)
            if url is None:
                return accounts
            page = _decode(_account_page, await self.get_next(url), "ad account list")

    async def get_next(self, url: str) -> bytes:
        """GET a ``paging.next`` URL exactly as Meta returned it."""
        reply = await self.graph.get_url(url, self._token)
        return reply.content

    async def campaigns_page(
        self,
        account_id: str,
        *,
        filtering: list[dict[str, Any]] | None = None,
        limit: int = PAGE_SIZE,
        next_url: str | None = None,
        fields: Sequence[str] = CAMPAIGN_FIELDS,
        edge: str = "campaigns",
    ) -> Page[GraphCampaign]:
        """One page of an ad account's campaigns (or another object ``edge``), narrowed by
        ``filtering`` on Meta's side; with ``next_url``, the page that link names."""
        if next_url is not None:
            content = await self.get_next(next_url)
        else:
            params: dict[str, Any] = {"fields": list(fields), "limit": limit}
            if filtering:
                params["filtering"] = filtering
            content = await self._get(f"{account_id}/{edge}", params)
        page: Page[GraphCampaign] = _decode(_campaign_page, content, "campaign page")
        return page

    async def campaign(
        self, campaign_id: str, *, fields: Sequence[str] = CAMPAIGN_FIELDS
    ) -> GraphCampaign:
        """One campaign's live fields (budget and name are re-read before a write)."""
        content = await self._get(campaign_id, {"fields": list(fields)})
        campaign: GraphCampaign = _decode(_campaign, content, "campaign")
        return campaign

    async def insights(
        self,
        object_id: str,
        *,
        date_preset: str,
        fields: Sequence[str],
        row_type: type[T],
        extra: dict[str, Any] | None = None,
    ) -> list[T]:
        """Insights rows of ``object_id`` for one date preset; ``[]`` when nothing was delivered."""
        params: dict[str, Any] = {
            "date_preset": date_preset,
            "fields": list(fields),
            "use_unified_attribution_setting": True,
            **(extra or {}),
        }
        decoder = msgspec.json.Decoder(Page[row_type])  # type: ignore[valid-type]
        rows: list[T] = []
        page: Page[T] = _decode(
            decoder, await self._get(f"{object_id}/insights", params), "insights"
        )
        follow = PageTrail("insights list")
        while True:
            rows.extend(page.data)
            url = follow.next_url(page)
            if url is None:
                return rows
            page = _decode(decoder, await self.get_next(url), "insights")

    def relative_url(self, request: BatchGet) -> str:
        query = urlencode(_query(request.params))
        path = f"{self.graph.version}/{request.path.lstrip('/')}"
        return f"{path}?{query}" if query else path

    async def batch(self, requests: Sequence[BatchGet]) -> list[BatchReply | None]:
        """Send up to 50 GETs in one call. The reply keeps request order; an item is ``None`` when
        Meta timed out before reaching it (retry those), and a failed item has ``code`` >= 400."""
        if not requests:
            return []
        if len(requests) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} requests")
        items = [{"method": "GET", "relative_url": self.relative_url(r)} for r in requests]
        reply = await self.graph.request(
            "POST",
            "",
            self._token,
            data={"batch": msgspec.json.encode(items).decode(), "include_headers": "false"},
            versioned=False,
        )
        return decode_batch_reply(reply.content, len(requests))


def decode_batch_reply(content: bytes, expected: int) -> list[BatchReply | None]:
    """A batch call's reply: one item per sub-request, in order (``None``: not reached)."""
    replies: list[BatchReply | None] = _decode(_batch, content, "batch reply")
    if len(replies) != expected:
        raise MetaError(
            f"the batch reply has {len(replies)} items for {expected} requests", transient=False
        )
    return replies


class PageTrail:
    """Where paging goes next, as Meta says: the ``paging.next`` URL exactly as returned, until a
    page has none (a page may be short, even empty, and still have one). Guards against a link
    seen before (a loop) and against more than ``max_pages`` pages."""

    def __init__(self, what: str, max_pages: int = MAX_PAGES) -> None:
        self.what = what
        self.max_pages = max_pages
        self.pages = 0
        self._seen: set[str] = set()

    def next_url(self, page: Page[Any]) -> str | None:
        """The URL of the page after ``page`` (which was just read), or None at the end."""
        self.pages += 1
        url = page.paging.next if page.paging is not None else None
        if not url:
            return None
        if url in self._seen:
            raise MetaError(
                f"the {self.what} repeated a paging link already followed; stopped to avoid a loop",
                transient=False,
            )
        if self.pages >= self.max_pages:
            raise MetaError(
                f"the {self.what} has more than {self.max_pages} pages; stopped", transient=False
            )
        self._seen.add(url)
        return url
