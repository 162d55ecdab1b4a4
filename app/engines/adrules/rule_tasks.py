"""A rule's tasks (spec AR-1): replaced with the whole rule, or added, edited and removed one at
a time. A removed task is archived, not deleted, so its records and cooldowns stay readable."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.engines.adrules.documents import task_body
from app.engines.adrules.errors import TaskNotFound
from app.engines.adrules.models import Rule, Task
from app.engines.adrules.rule_views import active_tasks, find_rule
from app.engines.adrules.schemas import TaskDocument, TaskIn
from app.engines.adrules.validation import Problems, check_single_task
from app.engines.adrules.webhook_secrets import seal_task
from app.errors import ValidationFailed
from app.platform.crypto import SecretBox


async def replace_tasks(
    session: WriteSession, box: SecretBox, rule: Rule, tasks: list[TaskIn], now: datetime
) -> None:
    current = {
        t.id: t
        for t in (
            await session.execute(
                select(Task).where(Task.rule_id == rule.id, Task.archived_at.is_(None))
            )
        ).scalars()
    }
    problems = Problems()
    for i, task in enumerate(tasks):
        if task.id is not None and task.id not in current:
            problems.add(f"tasks[{i}].id", f"task {task.id} is not a task of this rule")
    problems.raise_if_any()
    kept: set[int] = set()
    for position, given in enumerate(tasks):
        row = current.get(given.id) if given.id is not None else None
        task = seal_task(
            given, box, previous=row.document if row else None, field=f"tasks[{position}]"
        )
        if row is None:
            row = Task(
                rule_id=rule.id,
                workspace_id=rule.workspace_id,
                created_at=now,
                position=position,
                name="",
                document={},
                updated_at=now,
            )
            session.add(row)
        row.position = position
        row.name = task.name
        row.document = task_body(task)
        row.updated_at = now
        if task.id is not None:
            kept.add(task.id)
    # Removed tasks are archived, not deleted: their records and cooldowns stay readable.
    for task_id, row in current.items():
        if task_id not in kept:
            row.archived_at = now
    await session.flush()


def task_in(document: TaskDocument) -> TaskIn:
    return TaskIn(
        id=document.id,
        name=document.name,
        conditions=document.conditions,
        group=document.group,
        action=document.action,
        cooldown=document.cooldown,
    )


async def add_task(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    rule_id: int,
    task: TaskIn,
    now: datetime,
) -> Task:
    rule = await find_rule(session, workspace_id, rule_id)
    check_single_task(task)
    if task.id is not None:
        raise ValidationFailed.field("task.id", "a new task has no id")
    task = seal_task(task, box, previous=None, field="task")
    position = len(await active_tasks(session, rule.id))
    row = Task(
        rule_id=rule.id,
        workspace_id=workspace_id,
        position=position,
        name=task.name,
        document=task_body(task),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    rule.updated_at = now
    await session.flush()
    return row


async def _task(session: ReadSession, rule: Rule, task_id: int) -> Task:
    row = await session.scalar(
        select(Task).where(Task.id == task_id, Task.rule_id == rule.id, Task.archived_at.is_(None))
    )
    if row is None:
        raise TaskNotFound("task not found")
    return row


async def update_task(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    rule_id: int,
    task_id: int,
    task: TaskIn,
    now: datetime,
) -> Task:
    rule = await find_rule(session, workspace_id, rule_id)
    row = await _task(session, rule, task_id)
    check_single_task(task)
    task = seal_task(task, box, previous=row.document, field="task")
    row.name = task.name
    row.document = task_body(task)
    row.updated_at = now
    rule.updated_at = now
    await session.flush()
    return row


async def remove_task(
    session: WriteSession, *, workspace_id: int, rule_id: int, task_id: int, now: datetime
) -> None:
    rule = await find_rule(session, workspace_id, rule_id)
    row = await _task(session, rule, task_id)
    if len(await active_tasks(session, rule.id)) <= 1:
        raise ValidationFailed.field("tasks", "a rule needs at least one task", code="required")
    row.archived_at = now
    rule.updated_at = now
    await session.flush()
