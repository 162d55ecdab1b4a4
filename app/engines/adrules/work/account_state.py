"""One ad-rules account job's state, shared by the campaigns it processes: what was decided,
what waits to be committed, the stop once seen (see :mod:`.account`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from app.engines.adrules import records
from app.engines.adrules.approvals import propose
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.payloads import CampaignEntity, RunAccountPayload
from app.engines.adrules.schemas import TaskDocument
from app.engines.adrules.work.cooldown import LastExecution
from app.engines.adrules.work.evaluate import ConditionResult
from app.engines.adrules.work.execute import ActionRunner, ActionScope, CampaignRef
from app.engines.adrules.work.guards import BudgetChange

FLUSH_EVERY = 500
"""Records of runs that changed nothing are written in chunks of this many."""


@dataclass(slots=True)
class AccountRun:
    """One job's state shared by the campaigns it processes."""

    deps: AdRulesDeps
    payload: RunAccountPayload
    runner: ActionRunner
    last: dict[tuple[int, str], LastExecution]
    done: set[tuple[int, str]]
    allow_private_http: bool
    insights_seconds: float
    custom_seconds: float
    buffer: list[dict[str, Any]]
    lock: asyncio.Lock
    pending: dict[str, list[BudgetChange]] = field(default_factory=dict)
    """Budget changes made in this run per campaign, before their records are committed."""
    stopped: str | None = None
    """The platform stop, once seen during the run: no Graph call is made after it."""
    proposals: list[dict[str, Any]] = field(default_factory=list)
    """Changes held for approval (AR-28), written with the records that say so."""
    waiting: set[tuple[int, str]] = field(default_factory=set)
    """(task id, object id) pairs of the objects being acted on whose earlier proposal of that
    task still awaits approval."""

    async def flush(self, force: bool = False) -> None:
        async with self.lock:
            if not self.buffer or (not force and len(self.buffer) < FLUSH_EVERY):
                return
            rows, self.buffer = self.buffer, []
            held, self.proposals = self.proposals, []
            async with self.deps.db.write() as uow:
                await records.insert_records(uow.session, rows)
                await propose.insert_proposals(uow.session, held)


@dataclass(slots=True)
class Ready:
    """A task whose conditions passed on one campaign, outside its cooldown: it acts in the
    second phase, with the other campaigns' actions of the same task in batched calls."""

    task: TaskDocument
    campaign: CampaignEntity
    conditions: list[ConditionResult]
    steps: list[tuple[str, float]]
    scope: ActionScope
    ref: CampaignRef
