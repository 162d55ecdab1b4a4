"""What the explanation endpoints answer."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from app.schemas import Schema


class DomainMove(Schema):
    domain: str
    before: int | None
    """Its organic position in the previous measurement (None: not within the depth)."""
    after: int | None


class FeatureChange(Schema):
    feature: str
    """The provider's item type (``ai_overview``, ``local_pack``, ``video``, …)."""
    label: str
    change: str
    """``appeared``, ``vanished`` or ``owners_changed``."""
    owners_before: list[str]
    owners_after: list[str]


class AiOverviewChange(Schema):
    before: bool
    after: bool
    cited_before: bool
    """The tracked domain was among the AI Overview's references."""
    cited_after: bool
    references: list[str]
    """The domains the AI Overview cites now."""
    references_added: list[str]
    references_removed: list[str]


class DiffRow(Schema):
    rank: int
    before: str | None
    before_url: str | None
    after: str | None
    after_url: str | None
    mine_before: bool
    mine_after: bool


class MovementOut(Schema):
    keyword: str
    device: str
    request_id: int
    run_id: int
    previous_run_id: int
    measured_at: datetime
    previous_at: datetime
    position: int | None
    previous: int | None
    change: str
    """``up``, ``down``, ``same``, ``new``, ``lost`` or ``unranked``."""
    delta: int | None
    """Places gained (positive) or lost (negative)."""
    url: str | None
    previous_url: str | None
    url_changed: bool
    """Another page of the site ranks now (cannibalisation when it keeps changing)."""
    overtaken_by: list[DomainMove]
    """Domains above the tracked one now that were not before."""
    overtook: list[DomainMove]
    """Domains the tracked one passed."""
    features: list[FeatureChange]
    ai_overview: AiOverviewChange | None
    diff: list[DiffRow]
    """The top of both pages side by side (down to one place below the tracked domain)."""
    reasons: list[str]
    """The movement in plain language, most telling first."""
    pages_kept: bool
    """Both results pages were still stored (older ones go after ``RT_SNAPSHOT_RETENTION_DAYS``:
    then only positions, URLs and feature types explain the change)."""


class MovementsOut(Schema):
    keyword: str
    items: list[MovementOut]
    """Newest first: each measurement that changed something, against the one before it."""


class DiscoveredCompetitor(Schema):
    domain: str
    above: int
    """Pages (keyword and device, latest measurement) where it ranks above the tracked domain."""
    share: float
    """``above`` out of every page measured, in %."""
    average_position: float
    tracked: bool
    """Already one of the schedule's competitors."""


class DiscoveryOut(Schema):
    pages: int
    """Results pages read (keywords × devices of the latest measurement with a stored page)."""
    items: list[DiscoveredCompetitor]


class FeaturePoint(Schema):
    request_id: int
    measured_at: datetime
    device: str
    features: list[str]
    owned: list[str]
    cited_in_ai_overview: bool | None
    """None: no AI Overview on the page, or its page is no longer stored."""


class FeatureHistoryOut(Schema):
    keyword: str
    features: list[str]
    """Every feature type seen over the period, as rows of a grid."""
    points: list[FeaturePoint]


NoteText = Annotated[str, msgspec.Meta(max_length=1000)]
"""Bounded at the door; the service keeps at most 300 characters once spaces are collapsed."""


class AnnotationIn(Schema):
    at: datetime
    text: NoteText
    keyword: Annotated[str, msgspec.Meta(max_length=400)] | None = None


class AnnotationPatch(Schema):
    at: datetime | None = None
    text: NoteText | None = None


class AnnotationOut(Schema):
    id: int
    schedule_id: int
    keyword: str | None
    at: datetime
    text: str
    created_at: datetime
    updated_at: datetime


class ChartNote(Schema):
    x: int
    """Unix seconds: the measurement (automatic) or the annotation's moment."""
    day: str
    """The same moment's UTC date, ``YYYY-MM-DD``."""
    label: str
    kind: str
    """``user`` (an annotation someone wrote) or ``auto`` (found in the results)."""
    id: int | None = None
