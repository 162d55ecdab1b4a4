"""Changing a schedule: the editable and the fixed fields, the direct selection's editor (RT-3,
RT-11, RT-16, RT-20)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.clock import ManualClock
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.edits import edit, set_selection
from app.engines.ranktracking.schemas import ScheduleEdit
from app.errors import ValidationFailed
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list, make_schedule
from tests.factories import Tenant


async def test_rt3_the_selection_editor_normalises_and_refuses_an_empty_selection(
    runtime: Runtime, tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant, keywords=["red shoes"])
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await set_selection(
            uow.session, runtime.settings.ranktracking, row, ["Green shoes"], runtime.clock.now()
        )
        assert row.keywords == ["green shoes"]
        with pytest.raises(ValidationFailed):
            await set_selection(
                uow.session, runtime.settings.ranktracking, row, [], runtime.clock.now()
            )


async def test_rt3_the_selection_editor_refuses_like_creation(
    runtime: Runtime, tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant, keywords=["red shoes"])
    limit = runtime.settings.ranktracking.max_selection_keywords
    for keywords, code in (
        (["   "], "selection_empty"),
        ([f"k{i}" for i in range(limit + 1)], "selection_too_large"),
    ):
        with pytest.raises(ValidationFailed) as created:
            await make_schedule(runtime, tenant, keywords=keywords)
        async with runtime.db.write() as uow:
            row = await uow.session.get(Schedule, schedule.id)
            assert row is not None
            with pytest.raises(ValidationFailed) as edited:
                await set_selection(
                    uow.session, runtime.settings.ranktracking, row, keywords, runtime.clock.now()
                )
            assert row.keywords == ["red shoes"]
        assert [d["code"] for d in edited.value.details] == [code]
        assert (edited.value.message, edited.value.details) == (
            created.value.message,
            created.value.details,
        )


async def test_rt16_editable_and_fixed_fields(runtime: Runtime, tenant: Tenant, clock) -> None:
    kl = await make_list(runtime, tenant, ["a"])
    schedule = await make_schedule(runtime, tenant, list_id=kl.id, frequency="monthly")
    other = await make_list(runtime, tenant, ["b"], name="other")
    rt = runtime.settings.ranktracking
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        with pytest.raises(ValidationFailed) as info:
            await edit(uow.session, rt, row, ScheduleEdit(data_type="keyword_data"), clock.now())
        assert info.value.details[0]["code"] == "fixed_field"
        with pytest.raises(ValidationFailed):
            await edit(uow.session, rt, row, ScheduleEdit(list_id=other.id), clock.now())
    clock.advance(hours=5)
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        await edit(
            uow.session,
            rt,
            row,
            ScheduleEdit(
                frequency="weekly",
                depth="top100",
                devices=["desktop", "mobile"],
                monthly_cap_eur=Decimal("12.50"),
            ),
            clock.now(),
        )
        # RT-11: the frequency change re-anchors at the moment of the change.
        assert (row.anchor_at, (row.next_due_at - clock.now()).days) == (clock.now(), 7)
        assert (row.depth, row.devices, row.monthly_cap_cents) == (100, "desktop,mobile", 1250)
        await edit(uow.session, rt, row, ScheduleEdit(unlimited=True), clock.now())
        assert row.monthly_cap_cents is None


async def test_rt20_an_edited_cap_below_the_minimum_is_refused_and_nothing_changes(
    runtime: Runtime, tenant: Tenant, clock: ManualClock
) -> None:
    schedule = await make_schedule(runtime, tenant, keywords=["a"], monthly_cap_eur=Decimal("20"))
    async with runtime.db.write() as uow:
        row = await uow.session.get(Schedule, schedule.id)
        assert row is not None
        with pytest.raises(ValidationFailed) as info:
            await edit(
                uow.session,
                runtime.settings.ranktracking,
                row,
                ScheduleEdit(name="renamed", monthly_cap_eur=Decimal("4.99")),
                clock.now(),
            )
        assert [(d["field"], d["code"]) for d in info.value.details] == [
            ("monthly_cap_eur", "cap_too_low")
        ]
        assert (row.name, row.monthly_cap_cents) == ("Positions", 2000)
