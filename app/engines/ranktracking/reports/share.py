"""Shared report links: a read-only page of one schedule's positions and charts that a client
opens without an account.

The link holds a random token (256 bits) and only its SHA-256 is stored, as for API keys and
invitations. An unknown, expired or revoked token, or one whose schedule is gone, are one answer
(not found): the page does not tell which, so nobody learns that a token once existed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.share_models import LINK_DAYS, ReportLink
from app.errors import NotFound, ValidationFailed
from app.platform import audit
from app.platform.tokens import sha256_hex
from app.schemas import Schema

SHARE_TOKEN_PREFIX = "swr_"  # noqa: S105 - a prefix, not a secret
MAX_LINKS = 50
"""Links of one schedule listed (and live at once): a client's link is not a mailing list."""
NOT_FOUND = "this report link is not valid"

Days = Literal[7, 30, 90]


class ReportLinkIn(Schema):
    """How long the link opens the report: 7, 30 or 90 days."""

    days: Days = 30


class ReportLinkOut(Schema):
    id: int
    schedule_id: int
    prefix: str
    """The token's first characters, to tell links apart."""
    days: int
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    state: Literal["active", "expired", "revoked"]
    url: str | None = None
    """The link itself: only in the answer that created it, never again."""


class ReportLinkList(Schema):
    items: list[ReportLinkOut]


@dataclass(frozen=True, slots=True)
class NewLink:
    link: ReportLink
    token: str
    """Shown once to the person who made the link; never stored."""


def share_path(token: str) -> str:
    return f"/shared/ranktracking/{token}"


def state_of(link: ReportLink, now: datetime) -> Literal["active", "expired", "revoked"]:
    if link.revoked_at is not None:
        return "revoked"
    return "expired" if link.expires_at <= now else "active"


def link_out(link: ReportLink, now: datetime, url: str | None = None) -> ReportLinkOut:
    return ReportLinkOut(
        id=link.id,
        schedule_id=link.schedule_id,
        prefix=link.prefix,
        days=link.days,
        created_at=link.created_at,
        expires_at=link.expires_at,
        revoked_at=link.revoked_at,
        state=state_of(link, now),
        url=url,
    )


async def create_link(
    session: WriteSession,
    schedule: Schedule,
    *,
    days: int,
    created_by: int | None,
    now: datetime,
) -> NewLink:
    """A new link to ``schedule``'s report, valid ``days`` days (RT-113)."""
    if days not in LINK_DAYS:
        raise ValidationFailed.field("days", "must be 7, 30 or 90")
    if schedule.data_type != "serp":
        raise ValidationFailed.field("schedule", "only SERP schedules have position reports")
    live = await session.scalars(
        select(ReportLink.id).where(
            ReportLink.schedule_id == schedule.id,
            ReportLink.revoked_at.is_(None),
            ReportLink.expires_at > now,
        )
    )
    if len(list(live)) >= MAX_LINKS:
        raise ValidationFailed.field(
            "schedule", f"the schedule has {MAX_LINKS} live links: revoke one first"
        )
    token = SHARE_TOKEN_PREFIX + secrets.token_urlsafe(32)
    link = ReportLink(
        workspace_id=schedule.workspace_id,
        schedule_id=schedule.id,
        token_hash=sha256_hex(token),
        prefix=token[:12],
        days=days,
        created_by=created_by,
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    session.add(link)
    await session.flush()
    await _audit(session, "rank_schedule.report_link_created", link, now)
    return NewLink(link, token)


async def _audit(session: WriteSession, action: str, link: ReportLink, now: datetime) -> None:
    await audit.record(
        session,
        action=action,
        object_type="rank_schedule",
        object_id=link.schedule_id,
        workspace_id=link.workspace_id,
        after={"link_id": link.id, "days": link.days, "expires_at": link.expires_at.isoformat()},
        now=now,
    )


async def list_links(session: ReadSession, schedule: Schedule) -> list[ReportLink]:
    """The schedule's links, newest first (the last :data:`MAX_LINKS`)."""
    rows = await session.scalars(
        scoped_select(ReportLink, schedule.workspace_id)
        .where(ReportLink.schedule_id == schedule.id)
        .order_by(ReportLink.id.desc())
        .limit(MAX_LINKS)
    )
    return list(rows)


async def revoke_link(
    session: WriteSession, schedule: Schedule, link_id: int, now: datetime
) -> ReportLink:
    """Close the link at once (RT-116); revoking it again changes nothing."""
    link = await session.scalar(
        scoped_select(ReportLink, schedule.workspace_id).where(
            ReportLink.id == link_id, ReportLink.schedule_id == schedule.id
        )
    )
    if link is None:
        raise NotFound("report link not found")
    if link.revoked_at is None:
        link.revoked_at = now
        await session.flush()
        await _audit(session, "rank_schedule.report_link_revoked", link, now)
    return link


@dataclass(frozen=True, slots=True)
class OpenLink:
    link: ReportLink
    schedule: Schedule


async def open_link(session: ReadSession, token: str, now: datetime) -> OpenLink:
    """The schedule a live link shows; anything else is the same :class:`NotFound` (RT-115)."""
    if not token.startswith(SHARE_TOKEN_PREFIX) or len(token) > 100:
        raise NotFound(NOT_FOUND)
    link = await session.scalar(
        select(ReportLink).where(ReportLink.token_hash == sha256_hex(token))
    )
    if link is None or state_of(link, now) != "active":
        raise NotFound(NOT_FOUND)
    # The schedule is read through the link's own workspace: a link never shows another's data.
    schedule = await session.scalar(
        scoped_select(Schedule, link.workspace_id).where(Schedule.id == link.schedule_id)
    )
    if schedule is None:
        raise NotFound(NOT_FOUND)
    return OpenLink(link, schedule)
