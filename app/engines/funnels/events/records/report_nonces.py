"""Delivery reports whose signature covers a one-time token but not the body (Mailgun signs only
``timestamp + token``): the token is claimed and the reports are stored in one transaction, so a
request is either taken whole or refused whole.

A token is remembered in ``funnel_report_nonces`` until a request carrying it could no longer be
accepted anyway (its timestamp past the tolerance); the unique index makes the claim hold across
processes and workers, on SQLite and PostgreSQL alike: of two requests with the same token, one
inserts the row and the other finds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.db.dialect import insert_ignoring
from app.db.session import Database, WriteSession
from app.db.tenancy import scoped_delete
from app.engines.funnels.events.ingest import store
from app.engines.funnels.events.models import ReportNonce


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One delivery report to store as an inbound event."""

    name: str
    external_id: str
    payload: Mapping[str, Any]


async def claim_nonce(
    session: WriteSession,
    *,
    workspace_id: int,
    provider: str,
    nonce: str,
    expires_at: datetime,
    now: datetime,
) -> bool:
    """Remember ``nonce``; ``False`` when it was seen before (and has not expired)."""
    # Expired tokens go first: a token can come back only once its timestamp is refused anyway.
    await session.execute(
        scoped_delete(ReportNonce, workspace_id).where(
            ReportNonce.provider == provider, ReportNonce.expires_at < now
        )
    )
    claimed = await session.scalar(
        insert_ignoring(session, ReportNonce)
        .values(workspace_id=workspace_id, provider=provider, nonce=nonce, expires_at=expires_at)
        .returning(ReportNonce.id)
    )
    return claimed is not None


async def store_once(
    db: Database,
    *,
    workspace_id: int,
    provider: str,
    nonce: str,
    expires_at: datetime,
    reports: Iterable[ReportRow],
    now: datetime,
) -> int | None:
    """Claim the token and store the reports (``source`` ``delivery``) in one transaction: how
    many were new, or ``None`` (nothing stored) when the token was used before."""
    async with db.write() as uow:
        if not await claim_nonce(
            uow.session,
            workspace_id=workspace_id,
            provider=provider,
            nonce=nonce[:200],
            expires_at=expires_at,
            now=now,
        ):
            return None
        stored = 0
        for report in reports:
            new = await store(
                uow.session,
                workspace_id=workspace_id,
                source="delivery",
                name=report.name,
                external_id=report.external_id,
                payload=report.payload,
                now=now,
            )
            stored += new is not None
    return stored
