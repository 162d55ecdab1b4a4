"""The per-account job (spec AR-14 to AR-18, AR-21, AR-22): read, evaluate, act, record.

For one ad account of one dispatch: mark the batch running, read the Insights every condition
needs in batched calls, resolve custom metrics, then for every campaign and task evaluate the
conditions, check the cooldown, carry out the action and write one execution record. A campaign
that fails is recorded as an error and the others carry on. The batch record is closed with its
counts and status at the end.

Records of runs that changed something (a Graph write, a notification) are committed straight
after that campaign, the rest in chunks; a retried job finds them and does not act twice.

A shadow rule's run goes the same way up to the write: it re-reads the live values, plans the
change with its clamps and guards, and records ``would_execute`` with the before and after —
nothing is written to Meta and nothing is sent.

When Meta throttles the account for longer than a run may wait, the run is put back on the queue
(``run_at`` = when Meta expects access to return) instead of calling again and being refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec

from app.db.session import UnitOfWork
from app.engines.adrules import records
from app.engines.adrules.deps import AdRulesDeps, Defer
from app.engines.adrules.models import BATCH_QUEUED, AdAccount
from app.engines.adrules.payloads import CampaignEntity, RunAccountPayload, evaluation_zone
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_NOT_EXECUTED,
    RECORD_SKIPPED,
    RECORD_WOULD_EXECUTE,
)
from app.engines.adrules.schemas import LogOnly, NotifyEmail, NotifyWebhook, TaskDocument
from app.engines.adrules.work.batched import CONCURRENT_CALLS, BatchStats
from app.engines.adrules.work.changes import (
    ActionFailed,
    Change,
    action_parameters,
    not_deliverable_reason,
)
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown, next_permitted_at
from app.engines.adrules.work.evaluate import CampaignFacts, ConditionResult, evaluate_conditions
from app.engines.adrules.work.execute import ActionRunner, ActionScope, CampaignRef, needs_live_read
from app.engines.adrules.work.facts import Gathered, gather
from app.engines.adrules.work.guards import (
    BudgetChange,
    budget_changes,
    check_budget_write,
    direction,
)
from app.engines.adrules.work.sheets_values import (
    CustomMetricSource,
    workspace_credentials,
)
from app.integrations.http_guard import OutboundError
from app.integrations.mail import MailError
from app.integrations.meta.errors import MetaError
from app.integrations.meta.reader import MetaReader
from app.integrations.meta.structs import GraphCampaign
from app.integrations.meta.writer import MetaWriter, Update
from app.platform.models import Workspace
from app.scheduling.claim import LeaseLost
from app.scheduling.jobs import JobSpec
from app.scheduling.queue import JobQueue

log = logging.getLogger(__name__)

FLUSH_EVERY = 500
"""Records of runs that changed nothing are written in chunks of this many."""
BUDGET_FIELDS = frozenset({"daily_budget", "lifetime_budget"})
ACT_CHUNK = 500
"""Campaigns one task acts on between two commits of their records (re-read, then written, in
batch calls of up to 50)."""


def queue_defer(queue: JobQueue, job: JobSpec[RunAccountPayload]) -> Defer:
    """A :data:`Defer` through the job queue (``run_at``; one job id per deferral)."""

    async def defer(uow: UnitOfWork, payload: RunAccountPayload, at: datetime) -> None:
        job_id = f"{job.name}:{payload.batch_id}:{payload.account.id}:resume-{payload.deferrals}"
        await queue.enqueue(uow, job, payload, job_id=job_id, run_at=at)

    return defer


@dataclass(slots=True)
class _Run:
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

    async def flush(self, force: bool = False) -> None:
        async with self.lock:
            if not self.buffer or (not force and len(self.buffer) < FLUSH_EVERY):
                return
            rows, self.buffer = self.buffer, []
            async with self.deps.db.write() as uow:
                await records.insert_records(uow.session, rows)


async def run_account_job(deps: AdRulesDeps, payload: RunAccountPayload) -> str:
    """Run the job; returns the batch's final status."""
    rule = payload.rule
    if deps.lease is not None:
        await deps.lease()
    async with deps.db.write() as uow:
        await records.start_batch(uow.session, payload.batch_record_id, deps.clock.now())
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
        pending = [c for c in payload.entities if any((t.id, c.id) not in done for t in rule.tasks)]
        gathered = await gather(
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
        )
        if gathered.throttled is not None and gathered.unread:
            if deps.defer is not None and payload.deferrals < deps.max_deferrals:
                return await _defer(deps, payload, gathered.throttled)
            gathered.fail_unread()
        run = _Run(
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
        await _process(run, gathered, pending)
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
        return await records.finish_batch(
            uow.session, payload.batch_record_id, counts, deps.clock.now(), error=error
        )


@dataclass(slots=True)
class _Ready:
    """A task whose conditions passed on one campaign, outside its cooldown: it acts in the
    second phase, with the other campaigns' actions of the same task in batched calls."""

    campaign: CampaignEntity
    conditions: list[ConditionResult]
    steps: list[tuple[str, float]]
    scope: ActionScope
    ref: CampaignRef


async def _process(run: _Run, gathered: Gathered, campaigns: Sequence[CampaignEntity]) -> None:
    """Task by task, so a later task starts from what an earlier one wrote: decide on every
    campaign (conditions, cooldown, what Meta allows), then act on those that passed — the live
    re-reads as batched GETs, the writes as batched POSTs. Records of a chunk that wrote are
    committed straight after its write."""
    for task in run.payload.rule.tasks:
        ready: list[_Ready] = []
        for campaign in campaigns:
            if (task.id, campaign.id) in run.done:
                continue  # recorded by an earlier attempt of this job
            started = run.deps.clock.monotonic()
            try:
                decided = _decide(
                    run,
                    task,
                    campaign,
                    gathered.facts.get(campaign.id),
                    gathered.errors.get(campaign.id),
                )
            except LeaseLost:
                raise  # the job is another worker's now: this run ends, nothing is recorded
            except Exception as exc:  # one campaign's failure never ends the run (AR-22)
                log.exception("task %s failed on campaign %s", task.id, campaign.id)
                decided = _row(
                    run,
                    task,
                    campaign,
                    status=RECORD_ERROR,
                    reason=f"{type(exc).__name__}: {exc}",
                    steps=[("task", run.deps.clock.monotonic() - started)],
                )
            if isinstance(decided, _Ready):
                ready.append(decided)
            else:
                run.buffer.append(decided)
        await run.flush()
        for start in range(0, len(ready), ACT_CHUNK):
            chunk = ready[start : start + ACT_CHUNK]
            try:
                rows = await _act(run, task, chunk)
            except LeaseLost:
                raise
            except Exception as exc:
                log.exception("task %s failed on %d campaigns", task.id, len(chunk))
                rows = [
                    _failed(run, task, item, f"{type(exc).__name__}: {exc}", changed=True)
                    for item in chunk
                ]
            changed = False
            for row in rows:
                changed = row.pop("_changed", False) or changed
            run.buffer.extend(rows)
            await run.flush(force=changed)


def _decide(
    run: _Run,
    task: TaskDocument,
    campaign: CampaignEntity,
    facts: CampaignFacts | None,
    error: MetaError | None,
) -> dict[str, Any] | _Ready:
    """A record when the task ends here (no data, conditions not met, cooldown, an object Meta
    does not let it touch), else what the action phase needs."""
    steps: list[tuple[str, float]] = [
        ("insights_read", run.insights_seconds),
        ("custom_metrics", run.custom_seconds),
    ]
    if error is not None or facts is None:
        reason = error.describe() if error is not None else "no data was read for the campaign"
        return _row(
            run,
            task,
            campaign,
            status=RECORD_ERROR,
            reason=f"Insights read failed: {reason}",
            steps=steps,
        )
    started = run.deps.clock.monotonic()
    evaluation = evaluate_conditions(task.conditions, task.group, facts)
    steps.append(("evaluate", run.deps.clock.monotonic() - started))
    last = run.last.get((task.id, campaign.id))
    now = run.deps.clock.now()
    unread = [c for c in evaluation.conditions if c.sheet_failed and not c.passed]
    if not evaluation.passed and unread:
        # The sheet was unreachable and no usable copy existed: nothing was decided, say so.
        return _row(
            run,
            task,
            campaign,
            status=RECORD_ERROR,
            reason="custom metric sheet unavailable: " + "; ".join(c.reason or "" for c in unread),
            conditions=evaluation.conditions,
            steps=steps,
        )
    if not evaluation.passed:
        waiting = (
            last.next_permitted_at
            if last and last.next_permitted_at and last.next_permitted_at > now
            else None
        )
        return _row(
            run,
            task,
            campaign,
            status=RECORD_NOT_EXECUTED,
            reason=_why_not(evaluation.conditions, task.group),
            conditions=evaluation.conditions,
            steps=steps,
            next_at=waiting,
        )
    started = run.deps.clock.monotonic()
    verdict = check_cooldown(last, task.cooldown, now)
    steps.append(("cooldown", run.deps.clock.monotonic() - started))
    if not verdict.allowed:
        return _row(
            run,
            task,
            campaign,
            status=RECORD_SKIPPED,
            reason=verdict.reason,
            conditions=evaluation.conditions,
            steps=steps,
            next_at=verdict.next_allowed_at,
        )
    refused = not_deliverable_reason(task.action, campaign.effective_status)
    if refused is not None:
        return _row(
            run,
            task,
            campaign,
            status=RECORD_SKIPPED,
            reason=refused,
            conditions=evaluation.conditions,
            steps=steps,
        )
    scope = ActionScope(
        rule_id=run.payload.rule.id,
        rule_name=run.payload.rule.name,
        task_id=task.id,
        task_name=task.name,
        batch_id=run.payload.batch_id,
        account_id=run.payload.account.meta_id,
        currency=run.payload.account.currency,
        timezone=evaluation_zone(run.payload),
        now=now,
        allow_private_http=run.allow_private_http,
        level=run.payload.rule.level,
    )
    ref = CampaignRef(campaign.id, campaign.name, campaign.effective_status)
    return _Ready(campaign, evaluation.conditions, steps, scope, ref)


async def _stop_reason(run: _Run, items: Sequence[_Ready]) -> str | None:
    """The job's lease and the platform stop, asked immediately before a write or notification
    (a stop set during the run holds from the next write on; a lost lease raises
    :class:`LeaseLost` and the run ends)."""
    if run.deps.lease is not None:
        await run.deps.lease()
    if run.deps.stop is None:
        return None
    started = run.deps.clock.monotonic()
    stopped = await run.deps.stop.reason(run.payload.workspace_id)
    for item in items:
        item.steps.append(("stop_check", run.deps.clock.monotonic() - started))
    return stopped


async def _act(run: _Run, task: TaskDocument, chunk: list[_Ready]) -> list[dict[str, Any]]:
    """Carry out one task's action on ``chunk``; one record per campaign."""
    action = task.action
    if isinstance(action, LogOnly | NotifyEmail | NotifyWebhook):
        gate = asyncio.Semaphore(run.deps.concurrency)

        async def one(item: _Ready) -> dict[str, Any]:
            async with gate:
                return await _notify(run, task, item)

        return list(await asyncio.gather(*(one(item) for item in chunk)))
    live: dict[str, GraphCampaign | MetaError] = {}
    if needs_live_read(action):
        # Budget and name actions start from the live values, re-read now in batched GETs.
        started = run.deps.clock.monotonic()
        live = await run.runner.read_live([item.campaign.id for item in chunk])
        seconds = run.deps.clock.monotonic() - started
        for item in chunk:
            item.steps.append(("live_read", seconds))
    rows: list[dict[str, Any]] = []
    planned: list[tuple[_Ready, Change]] = []
    for item in chunk:
        decided = await _plan(run, task, item, live.get(item.campaign.id))
        if isinstance(decided, dict):
            rows.append(decided)
        else:
            planned.append((item, decided))
    if planned:
        rows += await _write_planned(run, task, planned)
    return rows


async def _plan(
    run: _Run, task: TaskDocument, item: _Ready, read: GraphCampaign | MetaError | None
) -> dict[str, Any] | Change:
    """The change one campaign needs, or the record of why none is written (a failed re-read, a
    refused plan, nothing to change, a guard; a shadow rule records the change it would make)."""
    if isinstance(read, MetaError):
        return _failed(run, task, item, f"live re-read: {read.describe()}")
    try:
        change = run.runner.plan(task.action, item.ref, item.scope, read)
    except ActionFailed as exc:
        return _failed(run, task, item, str(exc))
    if change.skip is not None:
        return _item_row(run, task, item, status=RECORD_SKIPPED, reason=change.skip)
    if change.write is None:
        return _item_row(run, task, item, status=RECORD_NOT_EXECUTED, reason=change.noop)
    refused = await _guard(run, item, change)
    if refused is not None:
        return _item_row(
            run,
            task,
            item,
            status=RECORD_SKIPPED,
            reason=refused,
            before=change.before,
            after=change.after,
        )
    if run.payload.rule.shadow:
        return _done(run, task, item, change.before, change.after)
    return change


async def _write_planned(
    run: _Run, task: TaskDocument, planned: list[tuple[_Ready, Change]]
) -> list[dict[str, Any]]:
    """Write the planned changes in batched calls; one record per campaign."""
    items = [item for item, _ in planned]

    async def stop() -> str | None:
        # Immediately before each write call: a stop set during the run holds from there.
        return await _stop_reason(run, items)

    started = run.deps.clock.monotonic()
    results = await run.runner.write(
        [Update(item.campaign.id, change.write or {}) for item, change in planned],
        before_call=stop if run.deps.stop is not None or run.deps.lease is not None else None,
    )
    seconds = run.deps.clock.monotonic() - started
    rows: list[dict[str, Any]] = []
    for item, change in planned:
        failed = results.get(item.campaign.id)
        if isinstance(failed, str):
            rows.append(_item_row(run, task, item, status=RECORD_SKIPPED, reason=failed))
            continue
        item.steps.append(("write", seconds))
        if failed is not None:
            rows.append(_failed(run, task, item, failed.describe(), changed=True))
        else:
            rows.append(_done(run, task, item, change.before, change.after))
    return rows


async def _notify(run: _Run, task: TaskDocument, item: _Ready) -> dict[str, Any]:
    """``log_only`` and the notifications, one campaign at a time (a shadow rule sends none)."""
    shadow = run.payload.rule.shadow
    if not shadow and not isinstance(task.action, LogOnly):
        stopped = await _stop_reason(run, [item])
        if stopped is not None:
            return _item_row(run, task, item, status=RECORD_SKIPPED, reason=stopped)
    try:
        outcome = await run.runner.run(
            task.action, item.ref, item.scope, item.conditions, dry_run=shadow
        )
    except (MetaError, ActionFailed, MailError, OutboundError) as exc:
        text = exc.describe() if isinstance(exc, MetaError) else str(exc)
        return _failed(run, task, item, text, changed=not shadow)
    item.steps.extend(outcome.steps)
    return _done(run, task, item, outcome.before, outcome.after)


async def _guard(run: _Run, item: _Ready, change: Change) -> str | None:
    """The cross-rule budget guards (changes per hour, reversals within another rule's
    cooldown), counting this run's own changes not yet committed."""
    if change.write is None or not BUDGET_FIELDS & set(change.write):
        return None
    now = item.scope.now
    async with run.deps.db.read() as session:
        seen = await budget_changes(session, run.payload.account.id, item.campaign.id, now)
    return check_budget_write(
        [*seen, *run.pending.get(item.campaign.id, [])],
        rule_id=run.payload.rule.id,
        planned_direction=direction(change.before, change.after),
        now=now,
        max_per_hour=run.deps.budget_changes_per_hour,
    )


def _done(
    run: _Run,
    task: TaskDocument,
    item: _Ready,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> dict[str, Any]:
    """The record of an action carried out (or, for a shadow rule, one it would have carried
    out); its cooldown starts now."""
    shadow = run.payload.rule.shadow
    executed_at = run.deps.clock.now()
    nxt = next_permitted_at(executed_at, task.cooldown)
    run.last[(task.id, item.campaign.id)] = LastExecution(executed_at, nxt)
    if after and BUDGET_FIELDS & set(after):
        # Not yet committed: the next task on this campaign must count it too.
        run.pending.setdefault(item.campaign.id, []).append(
            BudgetChange(
                run.payload.rule.id,
                run.payload.rule.name,
                executed_at,
                direction(before, after),
                nxt,
            )
        )
    row = _item_row(
        run,
        task,
        item,
        status=RECORD_WOULD_EXECUTE if shadow else RECORD_EXECUTED,
        reason="shadow: nothing was written or sent" if shadow else None,
        before=before,
        after=after,
        next_at=nxt,
    )
    row["_changed"] = not shadow
    return row


def _failed(
    run: _Run, task: TaskDocument, item: _Ready, text: str, *, changed: bool = False
) -> dict[str, Any]:
    """An ``error`` record of the action; ``changed`` when it may have reached the outside
    world (committed at once)."""
    row = _item_row(run, task, item, status=RECORD_ERROR, reason=f"the action failed: {text}")
    row["_changed"] = changed
    return row


def _item_row(
    run: _Run,
    task: TaskDocument,
    item: _Ready,
    *,
    status: str,
    reason: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    next_at: datetime | None = None,
) -> dict[str, Any]:
    return _row(
        run,
        task,
        item.campaign,
        status=status,
        reason=reason,
        conditions=item.conditions,
        steps=item.steps,
        before=before,
        after=after,
        next_at=next_at,
    )


def _why_not(conditions: Sequence[ConditionResult], group: str) -> str:
    failed = [c for c in conditions if not c.passed]
    parts = [
        f"{c.text} (saw {c.seen if c.seen is not None else 'no value'}"
        + (f": {c.reason})" if c.reason else ")")
        for c in failed
    ]
    joiner = "none of the conditions passed: " if group == "or" else "conditions not met: "
    return joiner + "; ".join(parts)


def skipped_row(
    payload: RunAccountPayload,
    task: TaskDocument,
    campaign: CampaignEntity,
    *,
    reason: str,
    now: datetime,
) -> dict[str, Any]:
    """A ``skipped`` record made before anything was read (the platform stop)."""
    return {
        "workspace_id": payload.workspace_id,
        "rule_id": payload.rule.id,
        "task_id": task.id,
        "ad_account_id": payload.account.id,
        "batch_id": payload.batch_id,
        "campaign_id": campaign.id,
        "campaign_name": campaign.name[:400],
        "action": type(task.action).__struct_config__.tag or "",
        "status": RECORD_SKIPPED,
        "reason": reason,
        "parameters": action_parameters(task.action),
        "before": None,
        "after": None,
        "conditions": [],
        "steps": [],
        "elapsed_seconds": 0.0,
        "next_permitted_at": None,
        "created_at": now,
    }


def _row(
    run: _Run,
    task: TaskDocument,
    campaign: CampaignEntity,
    *,
    status: str,
    steps: list[tuple[str, float]],
    reason: str | None = None,
    conditions: Sequence[ConditionResult] = (),
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    next_at: datetime | None = None,
) -> dict[str, Any]:
    payload = run.payload
    timeline = [{"step": name, "seconds": round(seconds, 6)} for name, seconds in steps]
    return {
        "workspace_id": payload.workspace_id,
        "rule_id": payload.rule.id,
        "task_id": task.id,
        "ad_account_id": payload.account.id,
        "batch_id": payload.batch_id,
        "campaign_id": campaign.id,
        "campaign_name": campaign.name[:400],
        "action": type(task.action).__struct_config__.tag or "",
        "status": status,
        "reason": reason,
        "parameters": action_parameters(task.action),
        "before": before,
        "after": after,
        "conditions": [_condition_json(c) for c in conditions],
        "steps": timeline,
        "elapsed_seconds": round(sum(s for _, s in steps), 6),
        "next_permitted_at": next_at,
        "created_at": run.deps.clock.now(),
    }


def _condition_json(result: ConditionResult) -> dict[str, Any]:
    return {
        "index": result.index,
        "kind": result.kind,
        "text": result.text,
        "seen": result.seen,
        "compared": result.compared,
        "passed": result.passed,
        "reason": result.reason,
        "source": result.source,
        "source_age_seconds": result.source_age_seconds,
        "source_note": result.source_note,
        "sheet_failed": result.sheet_failed,
    }
