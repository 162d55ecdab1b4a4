"""What each schedule operation leaves in the activity feed (RT-39): one entry per creation, edit,
selection change, pause, resume and end, pinned to its kind, message and fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.clock import ManualClock
from app.engines.ranktracking.models import Activity, Schedule
from app.engines.ranktracking.schedules.edits import edit, set_selection
from app.engines.ranktracking.schedules.lifecycle import end, pause, resume
from app.engines.ranktracking.schemas import ScheduleEdit
from app.runtime import Runtime
from tests.engines.ranktracking.factories import fund, launch, make_schedule
from tests.factories import Tenant


async def _entries(runtime: Runtime) -> list[tuple[Any, ...]]:
    async with runtime.db.read() as session:
        rows = (await session.execute(select(Activity).order_by(Activity.id))).scalars()
        return [
            (a.workspace_id, a.schedule_id, a.run_id, a.kind, a.code, a.message, a.created_at)
            for a in rows
        ]


def _entry(
    tenant: Tenant, schedule_id: int, kind: str, message: str, at: datetime
) -> tuple[Any, ...]:
    return (tenant.workspace_id, schedule_id, None, kind, None, message, at)


async def test_creation_records_the_name_type_and_frequency(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    schedule = await make_schedule(runtime, tenant, name="Shoes")
    assert await _entries(runtime) == [
        _entry(
            tenant, schedule.id, "schedule_created", '"Shoes" created (serp, daily)', clock.now()
        )
    ]


async def test_an_edit_records_the_fields_it_changed_under_the_new_name(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    schedule = await make_schedule(runtime, tenant, name="Shoes")
    clock.advance(hours=1)
    rt = runtime.settings.ranktracking
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await edit(
            uow.session, rt, row, ScheduleEdit(name="Boots", frequency="weekly"), clock.now()
        )
        # Nothing changed: nothing recorded.
        await edit(uow.session, rt, row, ScheduleEdit(name="Boots"), clock.now())
    assert (await _entries(runtime))[1:] == [
        _entry(
            tenant, schedule.id, "schedule_edited", '"Boots" edited: name, frequency', clock.now()
        )
    ]


async def test_the_selection_editor_records_the_selection_size(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    schedule = await make_schedule(runtime, tenant, name="Shoes")
    clock.advance(hours=1)
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await set_selection(
            uow.session, runtime.settings.ranktracking, row, ["a", "b", "c"], clock.now()
        )
    assert (await _entries(runtime))[1:] == [
        _entry(
            tenant,
            schedule.id,
            "schedule_edited",
            '"Shoes" selection set to 3 keywords',
            clock.now(),
        )
    ]


async def test_pause_resume_and_end_record_the_runs_they_cancelled(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, name="Shoes", devices=["desktop", "mobile"])
    await launch(runtime, schedule.id)
    expected = []
    for operation, kind, said in (
        (pause, "schedule_paused", '"Shoes" paused; 2 active runs cancelled'),
        (resume, "schedule_resumed", '"Shoes" resumed; due at the next hourly sweep'),
        (pause, "schedule_paused", '"Shoes" paused'),
        (end, "schedule_ended", '"Shoes" ended'),
    ):
        clock.advance(minutes=5)
        async with runtime.db.write() as uow:
            row = await uow.session.get(Schedule, schedule.id)
            assert row is not None
            await operation(uow.session, row, clock.now())
        expected.append(_entry(tenant, schedule.id, kind, said, clock.now()))
    entries = [e for e in await _entries(runtime) if e[3].startswith("schedule_")]
    assert entries[1:] == expected


async def test_ending_records_the_runs_it_cancelled(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, name="Shoes")
    await launch(runtime, schedule.id)
    clock.advance(minutes=5)
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await end(uow.session, row, clock.now())
    assert (await _entries(runtime))[-1] == _entry(
        tenant,
        schedule.id,
        "schedule_ended",
        '"Shoes" ended; 1 active run cancelled',
        clock.now(),
    )
