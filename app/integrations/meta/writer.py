""":class:`MetaWriter`: the only code that changes a campaign (status, daily budget, name).

Only the ad-rules worker's action code imports this module; the dispatcher cannot (an
import-linter contract checks it).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError, decode_error
from app.integrations.meta.structs import Success

_success = msgspec.json.Decoder(Success)

CampaignStatus = Literal["ACTIVE", "PAUSED"]


class MetaWriter:
    """Graph API writes made with one access token."""

    def __init__(self, graph: GraphClient, token: str | AccessToken) -> None:
        self.graph = graph
        self._token = token if isinstance(token, AccessToken) else AccessToken(token)

    def __repr__(self) -> str:
        return f"MetaWriter({self.graph.base_url}, token=***)"

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
