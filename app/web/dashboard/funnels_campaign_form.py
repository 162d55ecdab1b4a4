"""The campaign form of the dashboard: its fields' labels (so an error names the field a person
sees), the form read into :class:`~app.engines.funnels.campaigns.service.CampaignData`, and a
stored audience shown back in it."""

from __future__ import annotations

import json
from typing import Annotated, Any

from litestar.enums import RequestEncodingType
from litestar.params import Body

from app.engines.funnels.campaigns.models import DRAFT, SCHEDULED, Campaign
from app.engines.funnels.campaigns.service import CampaignData
from app.errors import ValidationFailed

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]

CAMPAIGNS = "/ui/funnels/campaigns"
CAMPAIGN_LABELS = {
    "name": "Name",
    "subject": "Subject",
    "preheader": "Preheader",
    "body": "Text",
    "to": "Send a test to",
    "contact_id": "Preview as",
    "confirm": "Confirm",
    "html": "HTML",
    "audience": "Audience",
    "rate_per_minute": "Messages per minute",
    "send_at": "Send at",
}


def predicate_json(text: str | None) -> dict[str, Any] | None:
    """A predicate posted or linked as JSON text; anything else is no predicate."""
    try:
        value = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def audience_of(data: dict[str, str]) -> dict[str, Any] | None:
    """The audience a form describes: a saved segment, conditions built in the rows, a tag; all
    of them when several are given (none: everyone with an e-mail address)."""
    parts: list[dict[str, Any]] = []
    saved = data.get("saved_segment", "").strip()
    if saved:
        try:
            parts.append({"kind": "segment", "segment_id": int(saved)})
        except ValueError:
            raise ValidationFailed.field(
                "audience", "choose a saved segment from the list"
            ) from None
    built = data.get("audience_predicate", "").strip()
    if built:
        rows = predicate_json(built)
        if rows is None:
            raise ValidationFailed.field("audience", "not a segment")
        parts.append(rows)
    tag = data.get("audience_tag", "").strip()
    if tag:
        parts.append({"kind": "has_tag", "tag": tag})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"kind": "all", "predicates": parts}


def campaign_data_of(data: dict[str, str]) -> CampaignData:
    """The campaign a posted form describes (its audience by :func:`audience_of`)."""
    try:
        rate = int(data.get("rate_per_minute", "600") or 600)
    except ValueError:
        raise ValidationFailed.field("rate_per_minute", "a whole number") from None
    return CampaignData(
        name=data.get("name", ""),
        subject=data.get("subject", ""),
        preheader=data.get("preheader", ""),
        body=data.get("body", ""),
        html=data.get("html") or None,
        audience=audience_of(data),
        rate_per_minute=rate,
    )


def editable(campaign: Campaign) -> bool:
    """The composer is shown until the campaign's audience is snapshotted."""
    return campaign.status in (DRAFT, SCHEDULED) and campaign.materialised_at is None


def split_audience(audience: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """The form's view of a stored audience: the saved segment it starts with, and the rest."""
    if audience is None:
        return "", None
    if audience.get("kind") == "segment":
        return str(audience.get("segment_id", "")), None
    items = audience.get("predicates") or []
    if audience.get("kind") == "all" and items and items[0].get("kind") == "segment":
        rest = items[1:]
        other = (
            None if not rest else rest[0] if len(rest) == 1 else {"kind": "all", "predicates": rest}
        )
        return str(items[0].get("segment_id", "")), other
    return "", audience
