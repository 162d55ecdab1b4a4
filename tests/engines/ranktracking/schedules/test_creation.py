"""Creating a schedule: the per-workspace limit, the duplicate key, the direct selection and the
list size (RT-2, RT-3, RT-5, RT-15, RT-29)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.engines.ranktracking.errors import (
    DuplicateSchedule,
    ScheduleLimitReached,
    ScheduleStateConflict,
)
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.lifecycle import end, resume
from app.errors import ValidationFailed
from app.runtime import Runtime
from tests.engines.ranktracking.factories import KEYWORD_DATA, make_list, make_schedule
from tests.factories import Tenant


async def test_rt15_rt29_duplicate_refused_archived_does_not_block(
    runtime: Runtime, tenant: Tenant
) -> None:
    kl = await make_list(runtime, tenant, ["a", "b"])
    first = await make_schedule(runtime, tenant, list_id=kl.id)
    with pytest.raises(DuplicateSchedule) as info:
        await make_schedule(runtime, tenant, list_id=kl.id, depth="top100", name="same key")
    assert f"schedule {first.id}" in info.value.message
    await make_schedule(runtime, tenant, list_id=kl.id, frequency="weekly")  # frequency differs
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, first.id)
        assert row is not None
        await end(uow.session, row, runtime.clock.now())
    again = await make_schedule(runtime, tenant, list_id=kl.id)  # the ended one no longer blocks
    assert again.id != first.id
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, first.id)
        assert row is not None
        assert row.archived_at is not None
        with pytest.raises(ScheduleStateConflict):
            await resume(uow.session, row, runtime.clock.now())


async def test_rt2_thirty_active_or_paused_per_workspace(runtime: Runtime, tenant: Tenant) -> None:
    ids = [(await make_schedule(runtime, tenant, name=f"s{i}")).id for i in range(30)]
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Schedule).where(Schedule.id == ids[0]).values(status="paused_user")
        )
    with pytest.raises(ScheduleLimitReached):
        await make_schedule(runtime, tenant, name="thirty-first")
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, ids[1])
        assert row is not None
        await end(uow.session, row, runtime.clock.now())
    await make_schedule(runtime, tenant, name="fits again")  # archived rows do not count


async def test_rt3_direct_selection_rules_at_creation(runtime: Runtime, tenant: Tenant) -> None:
    schedule = await make_schedule(
        runtime, tenant, keywords=["  Red   Shoes", "red shoes", "BLUE shoes"]
    )
    assert schedule.keywords == ["red shoes", "blue shoes"]
    with pytest.raises(ValidationFailed) as info:
        await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(201)])
    assert info.value.details[0]["code"] == "selection_too_large"
    await make_schedule(runtime, tenant, keywords=[f"k{i}" for i in range(200)], name="exactly 200")
    with pytest.raises(ValidationFailed) as info:
        await make_schedule(runtime, tenant, keywords=["   "])
    assert info.value.details[0]["code"] == "selection_empty"
    with pytest.raises(ValidationFailed) as info:
        await make_schedule(
            runtime,
            tenant,
            keywords=["a"],
            **KEYWORD_DATA,
        )
    assert info.value.details[0]["code"] == "selection_serp_only"


async def test_rt5_list_over_500_refused_at_creation(runtime: Runtime, tenant: Tenant) -> None:
    kl = await make_list(runtime, tenant, [f"k{i}" for i in range(501)])
    with pytest.raises(ValidationFailed) as info:
        await make_schedule(runtime, tenant, list_id=kl.id)
    assert info.value.details[0]["code"] == "members_over_limit"
    ok = await make_list(runtime, tenant, [f"k{i}" for i in range(500)], name="500")
    await make_schedule(runtime, tenant, list_id=ok.id)
