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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import msgspec

from app.db.session import UnitOfWork
from app.engines.adrules import records
from app.engines.adrules.approvals import propose
from app.engines.adrules.catalogue import UNIFIED_ATTRIBUTION
from app.engines.adrules.deps import AdRulesDeps, Defer
from app.engines.adrules.models import BATCH_QUEUED, AdAccount
from app.engines.adrules.notify.send import send_run_digests
from app.engines.adrules.payloads import CampaignEntity, RunAccountPayload, evaluation_zone
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_EXECUTED,
    RECORD_NOT_EXECUTED,
    RECORD_PROPOSED,
    RECORD_SKIPPED,
    RECORD_WOULD_EXECUTE,
)
from app.engines.adrules.schemas import (
    Action,
    LogOnly,
    NotifyEmail,
    NotifyWebhook,
    RuleDocument,
    TaskDocument,
)
from app.engines.adrules.work.batched import CONCURRENT_CALLS, BatchStats
from app.engines.adrules.work.changes import (
    ActionFailed,
    Change,
    action_parameters,
    not_deliverable_reason,
    object_noun,
)
from app.engines.adrules.work.cooldown import LastExecution, check_cooldown, next_permitted_at
from app.engines.adrules.work.evaluate import CampaignFacts, ConditionResult, evaluate_conditions
from app.engines.adrules.work.execute import (
    ActionRunner,
    ActionScope,
    BeforeCall,
    CampaignRef,
    live_fields,
    needs_live_read,
)
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
        gate = _read_gate(deps, payload)
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
            windows=rule.attribution_windows or (),
            before_call=gate,
            concurrency=min(deps.concurrency, 8),
        )
        if gathered.stopped is not None:
            # The stop went on while the Insights were read: no further call, nothing acts.
            await _record_stopped(deps, payload, done, gathered.stopped)
            return await _finish(deps, payload)
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


def _read_gate(deps: AdRulesDeps, payload: RunAccountPayload) -> BeforeCall | None:
    """Asked before every Insights call (spec AR-43): the job's lease, then the stop."""
    if deps.stop is None and deps.lease is None:
        return None

    async def ask() -> str | None:
        if deps.lease is not None:
            await deps.lease()
        return await deps.stop.reason(payload.workspace_id) if deps.stop is not None else None

    return ask


def attribution_label(rule: RuleDocument) -> str:
    """What a record says of the attribution its Insights were read with (spec AR-41)."""
    return ",".join(rule.attribution_windows or ()) or UNIFIED_ATTRIBUTION


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


@dataclass(slots=True)
class _Ready:
    """A task whose conditions passed on one campaign, outside its cooldown: it acts in the
    second phase, with the other campaigns' actions of the same task in batched calls."""

    task: TaskDocument
    campaign: CampaignEntity
    conditions: list[ConditionResult]
    steps: list[tuple[str, float]]
    scope: ActionScope
    ref: CampaignRef


def _changes_object(action: Action) -> bool:
    """Whether the action writes to the object on Meta (notifications and log_only do not)."""
    return not isinstance(action, LogOnly | NotifyEmail | NotifyWebhook)


async def _process(run: _Run, gathered: Gathered, campaigns: Sequence[CampaignEntity]) -> None:
    """Decide every task on every campaign (conditions, cooldown, what Meta allows); carry out
    the notifications task by task; then act on the objects: per object **one** live re-read and
    **one** write across all of the rule's tasks (spec AR-42) — each task plans from what the
    earlier ones planned, and the planned fields are merged into one POST. Re-reads and writes go
    out as batched calls; records of a chunk that wrote are committed straight after its write."""
    changes: list[_Ready] = []
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
        if _changes_object(task.action):
            changes.extend(ready)
        else:
            await _in_chunks(run, ready, lambda chunk: _notify_all(run, chunk), ACT_CHUNK)
    # Every task's changes of one object together, in task order.
    by_object: dict[str, list[_Ready]] = {}
    for item in changes:
        by_object.setdefault(item.campaign.id, []).append(item)
    objects = list(by_object.values())
    for start in range(0, len(objects), ACT_CHUNK):
        chunk = objects[start : start + ACT_CHUNK]
        await _in_chunks(run, [i for g in chunk for i in g], partial(_act_chunk, run, chunk), None)


async def _act_chunk(
    run: _Run, groups: list[list[_Ready]], _: list[_Ready]
) -> list[dict[str, Any]]:
    return await _act(run, groups)


async def _in_chunks(
    run: _Run,
    items: list[_Ready],
    act: Callable[[list[_Ready]], Awaitable[list[dict[str, Any]]]],
    size: int | None,
) -> None:
    """Run ``act`` on ``items`` (``size`` at a time; None: all at once); a chunk that fails is
    recorded as errors and the run goes on. Records of a chunk that changed something are
    committed at once."""
    step = size or max(1, len(items))
    for start in range(0, len(items), step):
        chunk = items[start : start + step]
        try:
            rows = await act(chunk)
        except LeaseLost:
            raise
        except Exception as exc:
            log.exception("ad rules actions failed on %d objects", len(chunk))
            rows = [
                _failed(run, item.task, item, f"{type(exc).__name__}: {exc}", changed=True)
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
        noun = object_noun(run.payload.rule.level)
        reason = error.describe() if error is not None else f"no data was read for the {noun}"
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
    return _Ready(task, campaign, evaluation.conditions, steps, scope, ref)


async def _stop_reason(run: _Run, items: Sequence[_Ready]) -> str | None:
    """The job's lease and the platform stop, asked immediately before every Graph call of the
    action phase, re-reads included (a stop set during the run holds from the next call on, and
    once seen it holds for the rest of the run; a lost lease raises :class:`LeaseLost`)."""
    if run.deps.lease is not None:
        await run.deps.lease()
    if run.stopped is not None:
        return run.stopped
    if run.deps.stop is None:
        return None
    started = run.deps.clock.monotonic()
    run.stopped = await run.deps.stop.reason(run.payload.workspace_id)
    for item in items:
        item.steps.append(("stop_check", run.deps.clock.monotonic() - started))
    return run.stopped


async def _notify_all(run: _Run, chunk: list[_Ready]) -> list[dict[str, Any]]:
    """``log_only`` and the notifications of one task's campaigns, a few at a time."""
    gate = asyncio.Semaphore(run.deps.concurrency)

    async def one(item: _Ready) -> dict[str, Any]:
        async with gate:
            return await _notify(run, item.task, item)

    return list(await asyncio.gather(*(one(item) for item in chunk)))


def _checked(run: _Run) -> BeforeCall | None:
    """What each Graph call of the action phase asks first (the lease and the stop)."""
    if run.deps.stop is None and run.deps.lease is None:
        return None

    async def ask() -> str | None:
        return await _stop_reason(run, [])

    return ask


async def _waiting(run: _Run, items: list[_Ready]) -> set[tuple[int, str]]:
    """Which (task, object) pairs already have a proposal awaiting approval (AR-28)."""
    by_task: dict[int, list[str]] = {}
    for item in items:
        by_task.setdefault(item.task.id, []).append(item.campaign.id)
    waiting: set[tuple[int, str]] = set()
    for task_id, object_ids in by_task.items():
        found = await propose.waiting_objects(
            run.deps.db, run.payload.workspace_id, task_id, object_ids
        )
        waiting.update((task_id, object_id) for object_id in found)
    return waiting


async def _act(run: _Run, groups: list[list[_Ready]]) -> list[dict[str, Any]]:
    """Carry out the planned changes of ``groups`` (each: one object's tasks, in task order):
    one batched re-read of the objects that need live values, every task planned from the
    values the earlier tasks left, and one merged write per object."""
    items = [item for group in groups for item in group]
    reread = [
        group[0].campaign.id
        for group in groups
        if any(needs_live_read(item.task.action) for item in group)
    ]
    live: dict[str, GraphCampaign | MetaError | str] = {}
    if reread:
        started = run.deps.clock.monotonic()
        live = await run.runner.read_live(
            reread, live_fields([i.task.action for i in items]), before_call=_checked(run)
        )
        seconds = run.deps.clock.monotonic() - started
        for item in items:
            if item.campaign.id in live:
                item.steps.append(("live_read", seconds))
    if run.payload.rule.approval is not None and not run.payload.rule.shadow:
        run.waiting = await _waiting(run, items)
    rows: list[dict[str, Any]] = []
    planned: list[_Merged] = []
    for group in groups:
        merged = await _plan_object(run, group, live.get(group[0].campaign.id), rows)
        if merged is not None:
            planned.append(merged)
    if planned:
        rows += await _write_merged(run, planned)
    return rows


@dataclass(slots=True)
class _Merged:
    """One object's write: the fields every task planned, and each task's own change."""

    object_id: str
    fields: dict[str, Any]
    changes: list[tuple[_Ready, Change]]


async def _plan_object(
    run: _Run,
    group: list[_Ready],
    read: GraphCampaign | MetaError | str | None,
    rows: list[dict[str, Any]],
) -> _Merged | None:
    """Plan one object's tasks in order, each from the values the earlier ones planned; the
    records of tasks that write nothing go to ``rows``. A shadow rule records each planned change
    as ``would_execute`` and writes nothing."""
    if isinstance(read, str):
        # The stop was seen before the re-read: nothing was read, nothing is written.
        rows.extend(_item_row(run, i.task, i, status=RECORD_SKIPPED, reason=read) for i in group)
        return None
    state = read
    status = group[0].ref.effective_status
    merged = _Merged(group[0].campaign.id, {}, [])
    for item in group:
        item.ref = CampaignRef(item.ref.id, item.ref.name, status)
        needed = state if needs_live_read(item.task.action) else None
        decided = await _plan(run, item.task, item, needed)
        if isinstance(decided, dict):
            rows.append(decided)
            continue
        assert decided.write is not None
        if isinstance(state, GraphCampaign):
            state = _after_write(state, decided.write)
        status = decided.write.get("status", status)
        if run.payload.rule.shadow:
            rows.append(_done(run, item.task, item, decided.before, decided.after))
            continue
        merged.fields.update(decided.write)
        merged.changes.append((item, decided))
    return merged if merged.changes else None


def _after_write(state: GraphCampaign, write: dict[str, Any]) -> GraphCampaign:
    """The object's values once ``write`` is applied: what the next task plans from."""
    values = {k: (str(v) if k in BUDGET_FIELDS else v) for k, v in write.items()}
    known = {k: v for k, v in values.items() if k in GraphCampaign.__struct_fields__}
    return msgspec.structs.replace(state, **known)


async def _plan(
    run: _Run, task: TaskDocument, item: _Ready, read: GraphCampaign | MetaError | None
) -> dict[str, Any] | Change:
    """The change one task makes to one object, or the record of why none is written (a failed
    re-read, a refused plan, nothing to change, a guard)."""
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
    if run.payload.rule.approval is not None and not run.payload.rule.shadow:
        # Held, not written: later tasks plan from the object as it is.
        return _propose(run, task, item, change)
    if change.after and BUDGET_FIELDS & set(change.after):
        # Not yet written: the object's later tasks, and their guards, must count it too.
        now = run.deps.clock.now()
        run.pending.setdefault(item.campaign.id, []).append(
            BudgetChange(
                run.payload.rule.id,
                run.payload.rule.name,
                now,
                direction(change.before, change.after),
                next_permitted_at(now, task.cooldown),
            )
        )
    return change


def _propose(run: _Run, task: TaskDocument, item: _Ready, change: Change) -> dict[str, Any]:
    """A rule that requires approval: the planned change is held, not written (AR-28)."""
    if (task.id, item.campaign.id) in run.waiting:
        return _item_row(
            run, task, item, status=RECORD_SKIPPED, reason=propose.already_waiting_reason()
        )
    now = run.deps.clock.now()
    held = propose.proposal_row(
        run.payload,
        task,
        campaign_id=item.campaign.id,
        campaign_name=item.campaign.name,
        write=change.write or {},
        before=change.before,
        after=change.after,
        now=now,
    )
    run.proposals.append(held)
    return _item_row(
        run,
        task,
        item,
        status=RECORD_PROPOSED,
        reason=propose.awaiting_reason(held["expires_at"]),
        before=change.before,
        after=change.after,
    )


async def _write_merged(run: _Run, planned: list[_Merged]) -> list[dict[str, Any]]:
    """One POST per object carrying every task's fields, in batched calls; each task's record
    follows its object's write."""
    started = run.deps.clock.monotonic()
    results = await run.runner.write(
        [Update(m.object_id, m.fields) for m in planned], before_call=_checked(run)
    )
    seconds = run.deps.clock.monotonic() - started
    rows: list[dict[str, Any]] = []
    for merged in planned:
        failed = results.get(merged.object_id)
        for item, change in merged.changes:
            if isinstance(failed, str):
                rows.append(_item_row(run, item.task, item, status=RECORD_SKIPPED, reason=failed))
                continue
            item.steps.append(("write", seconds))
            if failed is not None:
                rows.append(_failed(run, item.task, item, failed.describe(), changed=True))
            else:
                rows.append(_done(run, item.task, item, change.before, change.after))
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
        "timezone": evaluation_zone(payload),
        "attribution": attribution_label(payload.rule),
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
        "timezone": evaluation_zone(payload),
        "attribution": attribution_label(payload.rule),
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
