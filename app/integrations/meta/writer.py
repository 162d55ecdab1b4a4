""":class:`MetaWriter`: the only code that changes a campaign (status, daily budget, name).

Only the ad-rules worker's action code imports this module; the dispatcher cannot (an
import-linter contract checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlencode

import msgspec

from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.reader import MAX_BATCH, decode_batch_reply
from app.integrations.meta.structs import BatchReply, Success

_success = msgspec.json.Decoder(Success)

CampaignStatus = Literal["ACTIVE", "PAUSED"]
WRITABLE_FIELDS = frozenset({"status", "daily_budget", "lifetime_budget", "name", "bid_amount"})


@dataclass(frozen=True, slots=True)
class Update:
    """One object's write in a batch: ``POST /<object_id>`` with ``fields`` (budgets in the
    currency's minor units, as strings or integers)."""

    object_id: str
    fields: dict[str, str | int]


def update_body(fields: dict[str, str | int]) -> str:
    """A batch item's ``body``: the POST's parameters form-encoded into one string, as Meta's
    batch API takes them."""
    unknown = set(fields) - WRITABLE_FIELDS
    if unknown or not fields:
        raise ValueError(f"not a writable field set: {sorted(fields)}")
    for key in ("daily_budget", "lifetime_budget"):
        if key in fields and int(fields[key]) <= 0:
            raise ValueError("a budget must be positive")
    return urlencode({k: str(v) for k, v in sorted(fields.items())})


def confirmed(body: bytes) -> MetaError | None:
    """The error in a write's reply, or None when Meta confirmed it (``{"success": true}``)."""
    try:
        result = _success.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return decode_error("update reply", exc)
    if not result.success:
        return MetaError("the Graph API did not confirm the update", transient=False)
    return None


class MetaWriter:
    """Graph API writes made with one access token."""

    def __init__(self, graph: GraphClient, token: str | AccessToken) -> None:
        self.graph = graph
        self._token = token if isinstance(token, AccessToken) else AccessToken(token)

    def __repr__(self) -> str:
        return f"MetaWriter({self.graph.base_url}, token=***)"

    async def batch_update(self, updates: Sequence[Update]) -> list[BatchReply | None]:
        """Up to 50 writes in one batch call (``POST /`` with POST sub-requests); the reply keeps
        request order, an item ``None`` when Meta timed out before reaching it and ``code`` >= 400
        when it failed. Check a 2xx item's body with :func:`confirmed`."""
        if not updates:
            return []
        if len(updates) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} requests")
        items = [
            {
                "method": "POST",
                "relative_url": f"{self.graph.version}/{u.object_id}",
                "body": update_body(u.fields),
            }
            for u in updates
        ]
        reply = await self.graph.request(
            "POST",
            "",
            self._token,
            data={"batch": msgspec.json.encode(items).decode(), "include_headers": "false"},
            versioned=False,
        )
        return decode_batch_reply(reply.content, len(updates))

    async def update_campaign(
        self,
        campaign_id: str,
        *,
        status: CampaignStatus | None = None,
        daily_budget: int | None = None,
        name: str | None = None,
    ) -> None:
        """``POST /<campaign_id>``; ``daily_budget`` in the currency's minor units."""
        data: dict[str, str] = {}
        if status is not None:
            data["status"] = status
        if daily_budget is not None:
            if daily_budget <= 0:
                raise ValueError("a daily budget must be positive")
            data["daily_budget"] = str(daily_budget)
        if name is not None:
            data["name"] = name
        if not data:
            raise ValueError("nothing to update")
        reply = await self.graph.request("POST", campaign_id, self._token, data=data)
        try:
            result = _success.decode(reply.content)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise decode_error("update reply", exc) from None
        if not result.success:
            raise MetaError("the Graph API did not confirm the update", transient=False)
