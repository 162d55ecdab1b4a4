"""The second phase of an account job: notifications task by task, then per object **one** live
re-read and **one** merged write across all of the rule's tasks (spec AR-42), the platform stop
asked before every Graph call (spec AR-43), approvals held (AR-28), shadow rules recording what
they would have done."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from app.engines.adrules.approvals import propose
from app.engines.adrules.payloads import CampaignEntity
from app.engines.adrules.run_models import (
    RECORD_ERROR,
    RECORD_NOT_EXECUTED,
    RECORD_PROPOSED,
    RECORD_SKIPPED,
)
from app.engines.adrules.schemas import Action, LogOnly, NotifyEmail, NotifyWebhook, TaskDocument
from app.engines.adrules.work.account_decide import decide
from app.engines.adrules.work.account_rows import done_row, failed_row, item_row, record_row
from app.engines.adrules.work.account_state import AccountRun, Ready
from app.engines.adrules.work.changes import BUDGET_FIELDS, ActionFailed, Change
from app.engines.adrules.work.cooldown import next_permitted_at
from app.engines.adrules.work.execute import BeforeCall, CampaignRef, live_fields, needs_live_read
from app.engines.adrules.work.facts import Gathered
from app.engines.adrules.work.guards import (
    BudgetChange,
    budget_changes,
    check_budget_write,
    direction,
)
from app.integrations.http_guard import OutboundError
from app.integrations.mail import MailError
from app.integrations.meta.errors import MetaError
from app.integrations.meta.structs import GraphCampaign
from app.integrations.meta.writer import Update
from app.scheduling.claim import LeaseLost

log = logging.getLogger(__name__)

ACT_CHUNK = 500
"""Campaigns one task acts on between two commits of their records (re-read, then written, in
batch calls of up to 50)."""


def changes_object(action: Action) -> bool:
    """Whether the action writes to the object on Meta (notifications and log_only do not)."""
    return not isinstance(action, LogOnly | NotifyEmail | NotifyWebhook)


async def process(run: AccountRun, gathered: Gathered, campaigns: Sequence[CampaignEntity]) -> None:
    """Decide every task on every campaign (conditions, cooldown, what Meta allows); carry out
    the notifications task by task; then act on the objects: per object **one** live re-read and
    **one** write across all of the rule's tasks (spec AR-42) — each task plans from what the
    earlier ones planned, and the planned fields are merged into one POST. Re-reads and writes go
    out as batched calls; records of a chunk that wrote are committed straight after its write."""
    changes: list[Ready] = []
    for task in run.payload.rule.tasks:
        ready: list[Ready] = []
        for campaign in campaigns:
            if (task.id, campaign.id) in run.done:
                continue  # recorded by an earlier attempt of this job
            started = run.deps.clock.monotonic()
            try:
                decided = decide(
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
                decided = record_row(
                    run,
                    task,
                    campaign,
                    status=RECORD_ERROR,
                    reason=f"{type(exc).__name__}: {exc}",
                    steps=[("task", run.deps.clock.monotonic() - started)],
                )
            if isinstance(decided, Ready):
                ready.append(decided)
            else:
                run.buffer.append(decided)
        await run.flush()
        if changes_object(task.action):
            changes.extend(ready)
        else:
            await _in_chunks(run, ready, lambda chunk: _notify_all(run, chunk), ACT_CHUNK)
    # Every task's changes of one object together, in task order.
    by_object: dict[str, list[Ready]] = {}
    for item in changes:
        by_object.setdefault(item.campaign.id, []).append(item)
    objects = list(by_object.values())
    for start in range(0, len(objects), ACT_CHUNK):
        chunk = objects[start : start + ACT_CHUNK]
        await _in_chunks(run, [i for g in chunk for i in g], partial(_act_chunk, run, chunk), None)


async def _act_chunk(
    run: AccountRun, groups: list[list[Ready]], _: list[Ready]
) -> list[dict[str, Any]]:
    return await _act(run, groups)


async def _in_chunks(
    run: AccountRun,
    items: list[Ready],
    act: Callable[[list[Ready]], Awaitable[list[dict[str, Any]]]],
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
                failed_row(run, item.task, item, f"{type(exc).__name__}: {exc}", changed=True)
                for item in chunk
            ]
        changed = False
        for row in rows:
            changed = row.pop("_changed", False) or changed
        run.buffer.extend(rows)
        await run.flush(force=changed)


async def stop_reason(run: AccountRun, items: Sequence[Ready]) -> str | None:
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


async def _notify_all(run: AccountRun, chunk: list[Ready]) -> list[dict[str, Any]]:
    """``log_only`` and the notifications of one task's campaigns, a few at a time."""
    gate = asyncio.Semaphore(run.deps.concurrency)

    async def one(item: Ready) -> dict[str, Any]:
        async with gate:
            return await _notify(run, item.task, item)

    return list(await asyncio.gather(*(one(item) for item in chunk)))


def _checked(run: AccountRun) -> BeforeCall | None:
    """What each Graph call of the action phase asks first (the lease and the stop)."""
    if run.deps.stop is None and run.deps.lease is None:
        return None

    async def ask() -> str | None:
        return await stop_reason(run, [])

    return ask


async def _waiting(run: AccountRun, items: list[Ready]) -> set[tuple[int, str]]:
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


async def _act(run: AccountRun, groups: list[list[Ready]]) -> list[dict[str, Any]]:
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
    changes: list[tuple[Ready, Change]]


async def _plan_object(
    run: AccountRun,
    group: list[Ready],
    read: GraphCampaign | MetaError | str | None,
    rows: list[dict[str, Any]],
) -> _Merged | None:
    """Plan one object's tasks in order, each from the values the earlier ones planned; the
    records of tasks that write nothing go to ``rows``. A shadow rule records each planned change
    as ``would_execute`` and writes nothing."""
    if isinstance(read, str):
        # The stop was seen before the re-read: nothing was read, nothing is written.
        rows.extend(item_row(run, i.task, i, status=RECORD_SKIPPED, reason=read) for i in group)
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
            rows.append(done_row(run, item.task, item, decided.before, decided.after))
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
    run: AccountRun, task: TaskDocument, item: Ready, read: GraphCampaign | MetaError | None
) -> dict[str, Any] | Change:
    """The change one task makes to one object, or the record of why none is written (a failed
    re-read, a refused plan, nothing to change, a guard)."""
    if isinstance(read, MetaError):
        return failed_row(run, task, item, f"live re-read: {read.describe()}")
    try:
        change = run.runner.plan(task.action, item.ref, item.scope, read)
    except ActionFailed as exc:
        return failed_row(run, task, item, str(exc))
    if change.skip is not None:
        return item_row(run, task, item, status=RECORD_SKIPPED, reason=change.skip)
    if change.write is None:
        return item_row(run, task, item, status=RECORD_NOT_EXECUTED, reason=change.noop)
    refused = await _guard(run, item, change)
    if refused is not None:
        return item_row(
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


def _propose(run: AccountRun, task: TaskDocument, item: Ready, change: Change) -> dict[str, Any]:
    """A rule that requires approval: the planned change is held, not written (AR-28)."""
    if (task.id, item.campaign.id) in run.waiting:
        return item_row(
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
    return item_row(
        run,
        task,
        item,
        status=RECORD_PROPOSED,
        reason=propose.awaiting_reason(held["expires_at"]),
        before=change.before,
        after=change.after,
    )


async def _write_merged(run: AccountRun, planned: list[_Merged]) -> list[dict[str, Any]]:
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
                rows.append(item_row(run, item.task, item, status=RECORD_SKIPPED, reason=failed))
                continue
            item.steps.append(("write", seconds))
            if failed is not None:
                rows.append(failed_row(run, item.task, item, failed.describe(), changed=True))
            else:
                rows.append(done_row(run, item.task, item, change.before, change.after))
    return rows


async def _notify(run: AccountRun, task: TaskDocument, item: Ready) -> dict[str, Any]:
    """``log_only`` and the notifications, one campaign at a time (a shadow rule sends none)."""
    shadow = run.payload.rule.shadow
    if not shadow and not isinstance(task.action, LogOnly):
        stopped = await stop_reason(run, [item])
        if stopped is not None:
            return item_row(run, task, item, status=RECORD_SKIPPED, reason=stopped)
    try:
        outcome = await run.runner.run(
            task.action, item.ref, item.scope, item.conditions, dry_run=shadow
        )
    except (MetaError, ActionFailed, MailError, OutboundError) as exc:
        text = exc.describe() if isinstance(exc, MetaError) else str(exc)
        return failed_row(run, task, item, text, changed=not shadow)
    item.steps.extend(outcome.steps)
    return done_row(run, task, item, outcome.before, outcome.after)


async def _guard(run: AccountRun, item: Ready, change: Change) -> str | None:
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
