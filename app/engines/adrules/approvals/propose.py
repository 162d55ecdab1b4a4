"""The account job's hook for rules that require approval (spec AR-28): a change planned, with
its clamps and guards, is stored as a proposal and recorded ``proposed`` instead of written.

An object with a proposal of the same task still waiting is not proposed again (its record says
so): a rule running every 15 minutes must not queue up the same change again and again."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert

from app.db.session import Database, WriteSession
from app.db.tenancy import scoped_select
from app.engines.adrules.notify_models import PROPOSAL_PENDING, Proposal
from app.engines.adrules.payloads import RunAccountPayload
from app.engines.adrules.proposal_states import PROPOSALS
from app.engines.adrules.schemas import TaskDocument

CHUNK = 500


def expires_at(payload: RunAccountPayload, now: datetime) -> datetime:
    approval = payload.rule.approval
    hours = approval.window_hours if approval is not None else 24
    return now + timedelta(hours=hours)


def awaiting_reason(until: datetime) -> str:
    return f"awaiting approval until {until:%Y-%m-%d %H:%M} UTC"


def already_waiting_reason() -> str:
    return "an earlier proposal of this task on this object still awaits approval"


def proposal_row(
    payload: RunAccountPayload,
    task: TaskDocument,
    *,
    campaign_id: str,
    campaign_name: str,
    write: dict[str, Any],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "workspace_id": payload.workspace_id,
        "rule_id": payload.rule.id,
        "task_id": task.id,
        "ad_account_id": payload.account.id,
        "batch_id": payload.batch_id,
        "campaign_id": campaign_id,
        "campaign_name": campaign_name[:400],
        "action": type(task.action).__struct_config__.tag or "",
        "write": write,
        "before": before,
        "after": after,
        **PROPOSALS.create(PROPOSAL_PENDING),
        "reason": None,
        "expires_at": expires_at(payload, now),
        "created_at": now,
    }


async def insert_proposals(session: WriteSession, rows: list[dict[str, Any]]) -> None:
    if rows:
        await session.execute(insert(Proposal), rows)


async def waiting_objects(
    db: Database, workspace_id: int, task_id: int, campaign_ids: Sequence[str]
) -> set[str]:
    """The objects among ``campaign_ids`` with a pending proposal of ``task_id``."""
    out: set[str] = set()
    async with db.read() as session:
        for start in range(0, len(campaign_ids), CHUNK):
            chunk = list(campaign_ids[start : start + CHUNK])
            rows = await session.scalars(
                scoped_select(Proposal, workspace_id, Proposal.campaign_id).where(
                    Proposal.task_id == task_id,
                    Proposal.status == PROPOSAL_PENDING,
                    Proposal.campaign_id.in_(chunk),
                )
            )
            out.update(rows.all())
    return out
