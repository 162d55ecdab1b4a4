"""Declaring, reverting and automatically deciding an experiment's winner. Every decision is a
row (:class:`~app.engines.funnels.experiments.models.ExperimentWinner`); reverting stamps it and
the split returns to assigning each contact their own branch.

The automatic decision is taken only for an experiment with ``auto_winner`` whose verdict is
``winner`` and that never had a winner: once a person reverted a decision, the sweep does not
take it again (the person's choice stands until they declare one themselves)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, select, update

from app.db.session import WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.definitions.graph import Split
from app.engines.funnels.errors import FunnelNotFound
from app.engines.funnels.experiments.models import ExperimentWinner
from app.engines.funnels.experiments.report import experiment_definitions, experiment_report
from app.engines.funnels.models import Funnel
from app.errors import Conflict, NotFound, ValidationFailed

AUTOMATIC = "automatic"
PERSON = "person"


class ExperimentNotFound(NotFound):
    code = "experiment_not_found"


class WinnerAlreadyDeclared(Conflict):
    code = "winner_already_declared"


class NoStandingWinner(NotFound):
    code = "no_winner_declared"


async def _experiment(session: WriteSession, funnel: Funnel, node_id: str) -> Split:
    experiments, _ = await experiment_definitions(session, funnel)
    for node, _exp in experiments:
        if node.id == node_id:
            return node
    raise ExperimentNotFound(f"the funnel has no experiment at split '{node_id}'")


async def declare(
    session: WriteSession,
    funnel: Funnel,
    node_id: str,
    branch: str,
    *,
    user_id: int | None,
    now: datetime,
    reason: str = "",
) -> ExperimentWinner:
    """A person declares ``branch`` the winner: from now on new entrants of the split go there."""
    node = await _experiment(session, funnel, node_id)
    if branch not in {b.name for b in node.branches}:
        raise ValidationFailed(
            f"branch: the split '{node_id}' has no branch '{branch}'", code="unknown_branch"
        )
    return await _record(
        session, funnel, node_id, branch, PERSON, user_id, reason or "declared by a person", now
    )


async def _record(
    session: WriteSession,
    funnel: Funnel,
    node_id: str,
    branch: str,
    decided_by: str,
    user_id: int | None,
    reason: str,
    now: datetime,
) -> ExperimentWinner:
    standing = await session.scalar(
        select(
            exists().where(
                ExperimentWinner.funnel_id == funnel.id,
                ExperimentWinner.node_id == node_id,
                ExperimentWinner.reverted_at.is_(None),
            )
        )
    )
    if standing:
        raise WinnerAlreadyDeclared(
            f"the experiment at '{node_id}' already has a winner; revert it first"
        )
    row = ExperimentWinner(
        workspace_id=funnel.workspace_id,
        funnel_id=funnel.id,
        node_id=node_id,
        branch=branch,
        decided_by=decided_by,
        decided_by_user=user_id,
        reason=reason[:2000],
        decided_at=now,
    )
    session.add(row)
    await session.flush()
    return row


async def revert(
    session: WriteSession, funnel: Funnel, node_id: str, *, user_id: int | None, now: datetime
) -> ExperimentWinner:
    """Withdraw the standing winner: new entrants get their own branch again."""
    await _experiment(session, funnel, node_id)
    row = await session.scalar(
        select(ExperimentWinner).where(
            ExperimentWinner.funnel_id == funnel.id,
            ExperimentWinner.node_id == node_id,
            ExperimentWinner.reverted_at.is_(None),
        )
    )
    if row is None:
        raise NoStandingWinner(f"the experiment at '{node_id}' has no winner to revert")
    await session.execute(
        update(ExperimentWinner)
        .where(ExperimentWinner.id == row.id)
        .values(reverted_at=now, reverted_by_user=user_id)
    )
    await session.refresh(row)
    return row


async def decide_automatic(session: WriteSession, funnel: Funnel, *, now: datetime) -> list[str]:
    """Record the winner of every ``auto_winner`` experiment of the funnel whose verdict is in
    and that never had a winner; returns the split node ids decided."""
    decided: list[str] = []
    experiments, _ = await experiment_definitions(session, funnel)
    for node, exp in experiments:
        if not exp.auto_winner:
            continue
        ever = await session.scalar(
            select(
                exists().where(
                    ExperimentWinner.funnel_id == funnel.id, ExperimentWinner.node_id == node.id
                )
            )
        )
        if ever:
            continue
        report = await experiment_report(session, funnel, node, exp)
        if report.verdict_winner is None:
            continue
        await _record(
            session,
            funnel,
            node.id,
            report.verdict_winner,
            AUTOMATIC,
            None,
            report.verdict_message,
            now,
        )
        decided.append(node.id)
    return decided


async def decide_all(session: WriteSession, *, now: datetime) -> int:
    """The sweep: every funnel's automatic winners; returns how many were decided."""
    total = 0
    funnels = await session.scalars(
        select(Funnel).where(Funnel.current_version_id.is_not(None)).order_by(Funnel.id)
    )
    for funnel in list(funnels):
        total += len(await decide_automatic(session, funnel, now=now))
    return total


async def funnel_in(session: WriteSession, workspace_id: int, funnel_id: int) -> Funnel:
    funnel = await session.scalar(scoped_select(Funnel, workspace_id).where(Funnel.id == funnel_id))
    if funnel is None:
        raise FunnelNotFound(f"funnel {funnel_id} not found")
    return funnel
