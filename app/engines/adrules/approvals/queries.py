"""Reading a run's proposals (tenancy-scoped), and the workspace a signed approval link is for."""

from __future__ import annotations

from datetime import datetime

from app.db import keyset
from app.db.session import ReadSession
from app.db.tenancy import scoped_select
from app.engines.adrules.approvals import links
from app.engines.adrules.notify_models import Proposal
from app.platform.crypto import SecretBox
from app.platform.models import Workspace
from app.platform.service import webhook_secret


async def run_proposals(session: ReadSession, workspace_id: int, batch_id: str) -> list[Proposal]:
    rows = await session.scalars(
        scoped_select(Proposal, workspace_id)
        .where(Proposal.batch_id == batch_id)
        .order_by(Proposal.id)
    )
    return list(rows.all())


async def proposals_page(
    session: ReadSession,
    workspace_id: int,
    batch_id: str,
    *,
    after_id: int | None = None,
    limit: int = 100,
) -> list[Proposal]:
    """One page of a run's proposals in id order (``limit + 1`` rows)."""
    stmt = scoped_select(Proposal, workspace_id).where(Proposal.batch_id == batch_id)
    if after_id is not None:
        stmt = stmt.where(keyset.after(Proposal.id, after_id))
    rows = await session.scalars(stmt.order_by(Proposal.id).limit(limit + 1))
    return list(rows.all())


async def verify_link(
    session: ReadSession, box: SecretBox, token: str, now: datetime
) -> links.ApprovalClaims | None:
    """The link's claims when it is signed with its workspace's secret and not expired."""
    claimed = links.unverified(token)
    if claimed is None:
        return None
    workspace = await session.get(Workspace, claimed.workspace_id)
    if workspace is None:
        return None
    return links.verify(webhook_secret(box, workspace), token, now)
