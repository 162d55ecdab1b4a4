"""Which branch an experiment's split sends a contact to: the standing winner when one was
declared (automatically after a verdict, or by a person), otherwise the contact's own
deterministic branch (:func:`~app.engines.funnels.experiments.assign.experiment_branch`)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.definitions.graph import Split
from app.engines.funnels.experiments.assign import experiment_branch
from app.engines.funnels.experiments.models import ExperimentWinner

ASSIGNED = "assigned"
"""The step output's ``assignment`` for a contact placed by the hash (counted by the verdict)."""
WINNER = "winner"
"""... and for one routed to the standing winner (shown, not counted by the verdict)."""


async def standing_winner(
    session: ReadSession | WriteSession, funnel_id: int, node_id: str
) -> str | None:
    """The branch currently declared winner of this experiment, if any."""
    return await session.scalar(
        select(ExperimentWinner.branch).where(
            ExperimentWinner.funnel_id == funnel_id,
            ExperimentWinner.node_id == node_id,
            ExperimentWinner.reverted_at.is_(None),
        )
    )


async def experiment_choice(
    session: WriteSession, funnel_id: int, node: Split, contact_id: int
) -> tuple[str, str]:
    """``(branch, assignment)`` for a contact arriving at the experiment's split."""
    names = {b.name for b in node.branches}
    winner = await standing_winner(session, funnel_id, node.id)
    if winner is not None and winner in names:
        return winner, WINNER
    return experiment_branch(funnel_id, node, contact_id), ASSIGNED
