"""The 10-second dispatch sweep as the scheduler runs it: the process's ad-rules dependencies
(the shared Graph client, the queue, the clock's sleep, the platform stop) and what is due."""

from __future__ import annotations

import logging
from datetime import datetime

from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.deps import AdRulesDeps
from app.scheduling.jobs import JobContext
from app.scheduling.sweeper import EVERY_10_SECONDS, Sweep

log = logging.getLogger(__name__)


async def dispatch_tick(ctx: JobContext, tick: datetime) -> None:
    summary = await dispatch_due(ctx.resources.require(AdRulesDeps), tick, ctx.clock.now)
    if summary.rules or summary.resumed_accounts or summary.deferred_accounts:
        log.info(
            "ad rules dispatched",
            extra={
                "rules": summary.rules,
                "jobs": summary.jobs,
                "skipped_accounts": summary.skipped_accounts,
                "deferred_accounts": summary.deferred_accounts,
                "resumed_accounts": summary.resumed_accounts,
                "tick_budget_spent": summary.fetch.budget_spent,
                "fetch_timeouts": summary.fetch.timed_out,
            },
        )


DISPATCH_SWEEP = Sweep(name="adrules.dispatch", schedule=EVERY_10_SECONDS, run=dispatch_tick)
