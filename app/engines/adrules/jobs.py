"""The ad rules job: one per ad account per dispatch, run by the worker side.

Defined here, away from the dispatcher, because its handler executes actions: the dispatcher is
handed this spec through the engine's dependencies and never imports the worker (spec AR-19).
"""

from __future__ import annotations

import dataclasses

from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.work.account import run_account_job
from app.scheduling.job_lease import check_lease
from app.scheduling.jobs import JobContext, JobSpec, OwnedBy


async def run_account(ctx: JobContext, payload: RunAccountPayload) -> None:
    """Job handler of ``adrules.run_account`` (a throttled run is queued again as this job)."""
    deps = dataclasses.replace(ctx.resources.require(AdRulesDeps), lease=lambda: check_lease(ctx))
    await run_account_job(deps, payload)


RUN_ACCOUNT: JobSpec[RunAccountPayload] = JobSpec(
    name=RUN_ACCOUNT_JOB,
    payload_type=RunAccountPayload,
    handler=run_account,
    # Cooldowns make a retried run skip what already executed; three tries cover a worker crash.
    max_tries=3,
    timeout_seconds=900.0,
    backoff_seconds=10.0,
    owner=OwnedBy("workspace_id"),
)
