"""The ad rules job: one per ad account per dispatch, run by the worker side.

Defined here, away from the dispatcher, because its handler executes actions: the dispatcher is
handed this spec by the plugin and never imports the worker (spec AR-19).
"""

from __future__ import annotations

from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.work.account import deps_from_context, run_account_job
from app.scheduling.jobs import JobContext, JobSpec


async def run_account(ctx: JobContext, payload: RunAccountPayload) -> None:
    """Job handler of ``adrules.run_account`` (a throttled run is queued again as this job)."""
    await run_account_job(deps_from_context(ctx, RUN_ACCOUNT), payload)


RUN_ACCOUNT: JobSpec[RunAccountPayload] = JobSpec(
    name=RUN_ACCOUNT_JOB,
    payload_type=RunAccountPayload,
    handler=run_account,
    # Cooldowns make a retried run skip what already executed; three tries cover a worker crash.
    max_tries=3,
    timeout_seconds=900.0,
    backoff_seconds=10.0,
)
