"""The organisation's AI token quota (PL-4), its usage ledger, and the workspace's cache of
generated texts.

The quota is per calendar month (UTC). Before a call the deliverer *reserves* the call's upper
bound (:func:`~app.integrations.ai.estimate_tokens`) with one conditional UPDATE, committed before
the call, so deliverers running side by side cannot spend the same remaining tokens twice; after
the call the reservation is settled to the real ``usage.total_tokens``. A call that failed gives its
reservation back — unless its reply was lost after the provider may have billed it
(:func:`~app.integrations.ai.may_have_been_billed`): that reservation stays spent with a ``lost``
ledger line, so when the retry calls the provider again, both calls are counted. A deliverer that
dies between reserving and settling leaves the estimate counted: the quota errs on the side of
spending less, never more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, update

from app.db.dialect import insert, row_count
from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.outside.models import AiCacheEntry, AiQuota, AiUsage
from app.integrations.ai import QuotaDecision, decide_quota

DEFAULT_QUOTA_TOKENS = 200_000
"""Tokens per organisation per month until an admin sets another quota (or none)."""


def month_start(now: datetime) -> datetime:
    return datetime(now.year, now.month, 1, tzinfo=UTC)


async def _current(session: WriteSession, organisation_id: int, now: datetime) -> AiQuota:
    """The quota row, created with the default and rolled over to this month if needed."""
    period = month_start(now)
    await session.execute(
        insert(session, AiQuota)
        .values(
            organisation_id=organisation_id,
            quota_tokens=DEFAULT_QUOTA_TOKENS,
            period_start=period,
            used_tokens=0,
            updated_at=now,
        )
        .on_conflict_do_nothing()
    )
    await session.execute(
        update(AiQuota)
        .where(AiQuota.organisation_id == organisation_id, AiQuota.period_start < period)
        .values(period_start=period, used_tokens=0, updated_at=now)
    )
    row = await session.get(AiQuota, organisation_id, populate_existing=True)
    assert row is not None  # inserted above
    return row


async def reserve(
    session: WriteSession, organisation_id: int, estimated_tokens: int, now: datetime
) -> QuotaDecision:
    """Take ``estimated_tokens`` from this month's quota if they fit; the decision either way."""
    row = await _current(session, organisation_id, now)
    decision = decide_quota(
        used_tokens=row.used_tokens,
        quota_tokens=row.quota_tokens,
        estimated_tokens=estimated_tokens,
    )
    if not decision.allowed:
        return decision
    taken = await session.execute(
        update(AiQuota)
        .where(
            AiQuota.organisation_id == organisation_id,
            (AiQuota.quota_tokens.is_(None))
            | (AiQuota.used_tokens + estimated_tokens <= AiQuota.quota_tokens),
        )
        .values(used_tokens=AiQuota.used_tokens + estimated_tokens, updated_at=now)
    )
    if row_count(taken):
        return decision
    # Someone else took the tokens between our read and our update: decide on the new figure.
    row = await _current(session, organisation_id, now)
    refused = decide_quota(
        used_tokens=row.used_tokens,
        quota_tokens=row.quota_tokens,
        estimated_tokens=estimated_tokens,
    )
    return refused if not refused.allowed else QuotaDecision(allowed=False, reason="would_exceed")


async def settle(
    session: WriteSession, organisation_id: int, reserved: int, actual: int, now: datetime
) -> None:
    """Replace a reservation by what the call really cost (0 when it failed)."""
    settled = AiQuota.used_tokens - reserved + actual
    # A month that rolled over since the reservation starts from zero: never go below it.
    await session.execute(
        update(AiQuota)
        .where(AiQuota.organisation_id == organisation_id)
        .values(used_tokens=case((settled < 0, 0), else_=settled), updated_at=now)
    )


async def log_usage(
    session: WriteSession,
    *,
    organisation_id: int,
    workspace_id: int,
    key: str,
    outcome: str,
    tokens: int,
    model: str,
    detail: str,
    now: datetime,
) -> None:
    await session.execute(
        insert(session, AiUsage)
        .values(
            organisation_id=organisation_id,
            workspace_id=workspace_id,
            idempotency_key=key,
            outcome=outcome,
            tokens=tokens,
            model=model[:100],
            detail=detail[:200],
            at=now,
        )
        .on_conflict_do_nothing()
    )


@dataclass(frozen=True, slots=True)
class QuotaView:
    quota_tokens: int | None
    used_tokens: int
    period_start: datetime

    @property
    def remaining_tokens(self) -> int | None:
        return None if self.quota_tokens is None else max(0, self.quota_tokens - self.used_tokens)


async def quota_of(session: ReadSession, organisation_id: int, now: datetime) -> QuotaView:
    row = await session.get(AiQuota, organisation_id)
    period = month_start(now)
    if row is None:
        return QuotaView(DEFAULT_QUOTA_TOKENS, 0, period)
    if row.period_start < period:
        return QuotaView(row.quota_tokens, 0, period)
    return QuotaView(row.quota_tokens, row.used_tokens, row.period_start)


async def set_quota(
    session: WriteSession, organisation_id: int, quota_tokens: int | None, now: datetime
) -> QuotaView:
    row = await _current(session, organisation_id, now)
    row.quota_tokens = quota_tokens
    row.updated_at = now
    await session.flush()
    return QuotaView(row.quota_tokens, row.used_tokens, row.period_start)


async def cached_text(
    session: ReadSession | WriteSession, workspace_id: int, key: str
) -> str | None:
    text: str | None = await session.scalar(
        scoped_select(AiCacheEntry, workspace_id, AiCacheEntry.text).where(
            AiCacheEntry.cache_key == key
        )
    )
    return text


async def cache_text(
    session: WriteSession,
    *,
    workspace_id: int,
    key: str,
    text: str,
    model: str,
    tokens: int,
    now: datetime,
) -> None:
    await session.execute(
        insert(session, AiCacheEntry)
        .values(
            workspace_id=workspace_id,
            cache_key=key,
            text=text,
            model=model[:100],
            tokens=tokens,
            created_at=now,
        )
        .on_conflict_do_nothing()
    )
