"""The per-account job (spec AR-14 to AR-18, AR-21, AR-22): read, evaluate, act, record.

For one ad account of one dispatch: mark the batch running, read the Insights every condition
needs in batched calls, resolve custom metrics, then for every campaign and task evaluate the
conditions, check the cooldown, carry out the action and write one execution record. A campaign
that fails is recorded as an error and the others carry on. The batch record is closed with its
counts and status at the end.

Writes: per object, one live re-read and one write across all of the rule's tasks (spec AR-42):
each task plans from what the earlier ones planned, and their fields go out merged in one POST
(batched, 50 objects a call). The platform stop is asked before every Graph call — Insights reads
and re-reads included — and once seen, the run makes no further call (spec AR-43).

Records of runs that changed something (a Graph write, a notification) are committed straight
after that campaign, the rest in chunks; a retried job finds them and does not act twice. Every
record carries the zone the run evaluated in and the attribution its Insights were read with
(spec AR-41, AR-44).

A shadow rule's run goes the same way up to the write: it re-reads the live values, plans the
change with its clamps and guards, and records ``would_execute`` with the before and after —
nothing is written to Meta and nothing is sent.

When Meta throttles the account for longer than a run may wait, the run is put back on the queue
(``run_at`` = when Meta expects access to return) instead of calling again and being refused.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

import msgspec

from app.db.session import UnitOfWork
from app.engines.adrules import records
from app.engines.adrules.deps import AdRulesDeps, Defer
from app.engines.adrules.models import BATCH_QUEUED, AdAccount
from app.engines.adrules.notify.send import send_run_digests
from app.engines.adrules.payloads import CampaignEntity, RunAccountPayload, evaluation_zone
from app.engines.adrules.work.account_act import process
from app.engines.adrules.work.account_rows import skipped_row
from app.engines.adrules.work.account_state import FLUSH_EVERY, AccountRun
from app.engines.adrules.work.batched import CONCURRENT_CALLS, BatchStats
from app.engines.adrules.work.cooldown import LastExecution
from app.engines.adrules.work.execute import ActionRunner, BeforeCall
from app.engines.adrules.work.facts import Gathered, gather
from app.engines.adrules.work.sheets_values import CustomMetricSource, workspace_credentials
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.writer import MetaWriter
from app.platform.models import Workspace
from app.scheduling.claim import LeaseLost
from app.scheduling.jobs import JobSpec
from app.scheduling.queue import JobQueue

log = logging.getLogger(__name__)


def queue_defer(queue: JobQueue, job: JobSpec[RunAccountPayload]) -> Defer:
    """A :data:`Defer` through the job queue (``run_at``; one job id per deferral)."""

    async def defer(uow: UnitOfWork, payload: RunAccountPayload, at: datetime) -> None:
        job_id = f"{job.name}:{payload.batch_id}:{payload.account.id}:resume-{payload.deferrals}"
        await queue.enqueue(uow, job, payload, job_id=job_id, run_at=at)

    return defer


async def run_account_job(deps: AdRulesDeps, payload: RunAccountPayload) -> str:
    """Run the job; returns the batch's final status."""
    rule = payload.rule
    if deps.lease is not None:
        await deps.lease()
    async with deps.db.write() as uow:
        await records.start_batch(
            uow.session, payload.batch_record_id, deps.clock.now(), evaluation_zone(payload)
        )
        account = await uow.session.get(AdAccount, payload.account.id)
        workspace = await uow.session.get(Workspace, payload.workspace_id)
    if account is None or not account.active or account.workspace_id != payload.workspace_id:
        # Deactivated between the dispatch and now: nothing runs on it (spec AR-20).
        return await _finish(deps, payload, error="the ad account is not active")
    try:
        async with deps.db.read() as session:
            done = await records.recorded_pairs(session, payload.batch_id, payload.account.id)
            last = await records.last_executions(
                session,
                [t.id for t in rule.tasks],
                [c.id for c in payload.entities],
                shadow=rule.shadow,
            )
        stopped = await deps.stop.reason(payload.workspace_id) if deps.stop else None
        if stopped is not None:
            # Queued or deferred before the stop went on: touch nothing, say so per campaign.
            await _record_stopped(deps, payload, done, stopped)
            return await _finish(deps, payload)
        token = payload.access_token(deps.secrets)
        reader = MetaReader(deps.graph, token)
        pending = [c for c in payload.entities if any((t.id, c.id) not in done for t in rule.tasks)]
        gathered = await _read_facts(deps, payload, reader, pending)
        if gathered.stopped is not None:
            # The stop went on while the Insights were read: no further call, nothing acts.
            await _record_stopped(deps, payload, done, gathered.stopped)
            return await _finish(deps, payload)
        if gathered.throttled is not None and gathered.unread:
            if deps.defer is not None and payload.deferrals < deps.max_deferrals:
                return await _defer(deps, payload, gathered.throttled)
            gathered.fail_unread()
        run = _new_run(deps, payload, reader, token, workspace, gathered, last, done, pending)
        await process(run, gathered, pending)
        await run.flush(force=True)
    except LeaseLost:
        # Another worker runs this job now: the batch and the campaigns left are its own.
        log.warning(
            "ad rules run stopped, its job lease was lost: batch %s account %s",
            payload.batch_id,
            payload.account.meta_id,
        )
        raise
    except Exception as exc:
        log.exception(
            "ad rules run failed: batch %s account %s", payload.batch_id, payload.account.meta_id
        )
        await _finish(deps, payload, error=f"the run stopped: {type(exc).__name__}: {exc}")
        raise
    return await _finish(deps, payload)


async def _read_facts(
    deps: AdRulesDeps,
    payload: RunAccountPayload,
    reader: MetaReader,
    pending: list[CampaignEntity],
) -> Gathered:
    """The Insights and custom metrics every condition of the rule needs, for ``pending``."""
    rule = payload.rule
    credentials = await workspace_credentials(
        deps.db, deps.secrets, payload.workspace_id, deps.token_minter
    )
    custom = CustomMetricSource(
        db=deps.db,
        clock=deps.clock,
        client=deps.sheets,
        cache=deps.sheet_cache,
        workspace_id=payload.workspace_id,
        credentials=credentials,
        copy_max_age=deps.sheet_copy_max_age,
    )
    gate = _read_gate(deps, payload)
    return await gather(
        tasks=rule.tasks,
        campaigns=pending,
        currency=payload.account.currency,
        timezone=evaluation_zone(payload),
        now=deps.clock.now(),
        reader=reader,
        custom=custom,
        # Account-level Insights are read at level=campaign: other levels read per object.
        mode="packed"
        if rule.level != "campaign" and deps.insights_mode == "account"
        else deps.insights_mode,
        account_id=payload.account.meta_id,
        sleep=deps.sleep,
        timer=deps.clock.monotonic,
        retry_delays=deps.item_retry_delays,
        max_wait_seconds=deps.throttle_max_wait_seconds,
        windows=rule.attribution_windows or (),
        before_call=gate,
        concurrency=min(deps.concurrency, 8),
    )


def _new_run(
    deps: AdRulesDeps,
    payload: RunAccountPayload,
    reader: MetaReader,
    token: str,
    workspace: Workspace | None,
    gathered: Gathered,
    last: dict[tuple[int, str], LastExecution],
    done: set[tuple[int, str]],
    pending: list[CampaignEntity],
) -> AccountRun:
    """The job's state for its two phases, with the action runner its writes go through."""
    return AccountRun(
        deps=deps,
        payload=payload,
        runner=ActionRunner(
            reader=reader,
            writer=MetaWriter(deps.graph, token),
            mail=deps.mail,
            http=deps.webhook_http,
            timer=deps.clock.monotonic,
            secrets=deps.secrets,
            sleep=deps.sleep,
            retry_delays=deps.item_retry_delays,
            max_wait_seconds=deps.throttle_max_wait_seconds,
            batch_size=deps.write_batch_size,
            concurrency=min(deps.concurrency, CONCURRENT_CALLS),
            stats=deps.write_stats if deps.write_stats is not None else BatchStats(),
        ),
        last=last,
        done=done,
        allow_private_http=bool(workspace and workspace.allow_private_http),
        insights_seconds=gathered.insights_seconds,
        custom_seconds=gathered.custom_seconds / max(1, len(pending)),
        buffer=[],
        lock=asyncio.Lock(),
    )


def _read_gate(deps: AdRulesDeps, payload: RunAccountPayload) -> BeforeCall | None:
    """Asked before every Insights call (spec AR-43): the job's lease, then the stop."""
    if deps.stop is None and deps.lease is None:
        return None

    async def ask() -> str | None:
        if deps.lease is not None:
            await deps.lease()
        return await deps.stop.reason(payload.workspace_id) if deps.stop is not None else None

    return ask


async def _record_stopped(
    deps: AdRulesDeps, payload: RunAccountPayload, done: set[tuple[int, str]], reason: str
) -> None:
    now = deps.clock.now()
    rows = [
        skipped_row(payload, task, campaign, reason=reason, now=now)
        for campaign in payload.entities
        for task in payload.rule.tasks
        if (task.id, campaign.id) not in done
    ]
    for start in range(0, len(rows), FLUSH_EVERY):
        async with deps.db.write() as uow:
            await records.insert_records(uow.session, rows[start : start + FLUSH_EVERY])
    log.warning(
        "ad rules run stopped: batch %s account %s, %d records skipped (%s)",
        payload.batch_id,
        payload.account.meta_id,
        len(rows),
        reason,
    )


async def _defer(deps: AdRulesDeps, payload: RunAccountPayload, throttle: MetaError) -> str:
    """Meta asked for a longer pause than a run may wait: instead of calling again on a fixed
    schedule (and being refused), the whole remaining run goes back on the queue for when Meta
    expects access to return. Records already written make the resumed run skip their work."""
    wait = throttle.retry_after_seconds or deps.throttle_max_wait_seconds
    at = deps.clock.now() + timedelta(seconds=wait)
    again = msgspec.structs.replace(payload, deferrals=payload.deferrals + 1)
    async with deps.db.write() as uow:
        assert deps.defer is not None
        await deps.defer(uow, again, at)
        await records.defer_batch(
            uow.session, payload.batch_record_id, at, f"Meta throttled the ad account: {throttle}"
        )
    log.info(
        "ad rules run throttled: batch %s account %s resumes in %.0f s",
        payload.batch_id,
        payload.account.meta_id,
        wait,
    )
    return BATCH_QUEUED


async def _finish(
    deps: AdRulesDeps, payload: RunAccountPayload, *, error: str | None = None
) -> str:
    async with deps.db.write() as uow:
        counts = await records.batch_counts(uow.session, payload.batch_id, payload.account.id)
        status = await records.finish_batch(
            uow.session, payload.batch_record_id, counts, deps.clock.now(), error=error
        )
    try:
        # The run's last account to finish sends its digests (AR-27).
        await send_run_digests(deps, payload)
    except Exception:
        log.exception("ad rules digests failed: batch %s", payload.batch_id)
    return status
