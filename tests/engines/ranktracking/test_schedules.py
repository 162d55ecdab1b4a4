"""Schedule rules: limits, duplicate key, edits, duplicate for mobile, end (RT-1 to RT-17, RT-29)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import update

from app.engines.ranktracking.errors import (
    DuplicateSchedule,
    ScheduleLimitReached,
    ScheduleStateConflict,
)
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedule_rules import dedup_key, validated
from app.engines.ranktracking.schedules import edit, end, mobile_draft, resume, set_selection
from app.engines.ranktracking.schemas import ScheduleEdit
from app.errors import ValidationFailed
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list, make_schedule
from tests.factories import Tenant


def _config(**overrides: Any):  # type: ignore[no-untyped-def]
    values: dict[str, Any] = {
        "name": "n",
        "data_type": "serp",
        "frequency": "daily",
        "list_id": 7,
        "keywords": None,
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": "a.com",
        "devices": ["desktop"],
        "packages": None,
        "monthly_cap_eur": None,
        "max_selection": 200,
    }
    values.update(overrides)
    return validated(**values)


@pytest.mark.parametrize(
    ("field", "value", "in_key"),
    [
        ("list_id", 8, True),
        ("frequency", "weekly", True),
        ("devices", ["desktop", "mobile"], True),
        ("location_code", 2250, True),
        ("language_code", "fr", True),
        ("depth", "top100", False),
        ("monthly_cap_eur", Decimal("20"), False),
        ("domain", "b.com", False),
        ("name", "other", False),
    ],
)
def test_rt15_duplicate_key_matrix_serp(field: str, value: object, in_key: bool) -> None:
    base = dedup_key(_config())
    changed = dedup_key(_config(**{field: value}))
    assert (changed != base) is in_key


def test_rt15_duplicate_key_keyword_data_and_selections() -> None:
    kd = {
        "data_type": "keyword_data",
        "frequency": "monthly",
        "depth": None,
        "devices": None,
        "domain": None,
    }
    base = dedup_key(_config(**kd, packages=["volume"]))
    assert dedup_key(_config(**kd, packages=["volume", "cpc"])) == base  # packages not in the key
    assert dedup_key(_config(**{**kd, "frequency": "quarterly"}, packages=["volume"])) != base
    assert dedup_key(_config(**kd, packages=["volume"])) != dedup_key(_config())  # data type is
    assert dedup_key(_config(list_id=None, keywords=["a"])) is None  # direct selections have none


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


async def test_rt3_direct_selection_rules(runtime: Runtime, tenant: Tenant) -> None:
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
            data_type="keyword_data",
            frequency="monthly",
            depth=None,
            devices=None,
            domain=None,
            packages=["volume"],
        )
    assert info.value.details[0]["code"] == "selection_serp_only"
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


async def test_rt5_list_over_500_refused_at_creation(runtime: Runtime, tenant: Tenant) -> None:
    kl = await make_list(runtime, tenant, [f"k{i}" for i in range(501)])
    with pytest.raises(ValidationFailed) as info:
        await make_schedule(runtime, tenant, list_id=kl.id)
    assert info.value.details[0]["code"] == "members_over_limit"
    ok = await make_list(runtime, tenant, [f"k{i}" for i in range(500)], name="500")
    await make_schedule(runtime, tenant, list_id=ok.id)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"depth": "top20"}, "depth"),
        ({"location_code": 0}, "location_code"),
        ({"language_code": "xx"}, "language_code"),
        ({"language_code": "english"}, "language_code"),
        ({"devices": []}, "devices"),
        ({"frequency": "quarterly"}, "frequency"),
        ({"monthly_cap_eur": Decimal("4.99")}, "monthly_cap_eur"),
        ({"domain": "not a domain"}, "domain"),
    ],
)
def test_rt7_rt12_rt20_serp_context_rules(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        _config(**overrides)
    assert info.value.details[0]["field"] == field


def test_rt7_keyword_data_rules() -> None:
    kd = {"data_type": "keyword_data", "depth": None, "devices": None, "domain": None}
    with pytest.raises(ValidationFailed) as info:
        _config(**kd, frequency="weekly", packages=["volume"])
    assert info.value.details[0]["field"] == "frequency"
    with pytest.raises(ValidationFailed) as info:
        _config(**kd, frequency="monthly", packages=[])
    assert info.value.details[0]["code"] == "packages_empty"
    assert _config(**kd, frequency="quarterly", packages=["trends", "volume"]).packages == [
        "volume",
        "trends",
    ]
    # The provider's spelling: Chinese keeps its region, other languages have none.
    assert _config(language_code="zh-tw").language_code == "zh-TW"
    assert _config(language_code="EN").language_code == "en"
    with pytest.raises(ValidationFailed):
        _config(language_code="pt-BR")


async def test_rt16_editable_and_fixed_fields(runtime: Runtime, tenant: Tenant, clock) -> None:  # type: ignore[no-untyped-def]
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


async def test_rt17_duplicate_for_mobile_prefills_without_changing_the_source(
    runtime: Runtime, tenant: Tenant
) -> None:
    kl = await make_list(runtime, tenant, ["a"])
    source = await make_schedule(runtime, tenant, list_id=kl.id, monthly_cap_eur=Decimal("9"))
    draft = mobile_draft(source)
    assert (draft.devices, draft.list_id, draft.depth, draft.monthly_cap_eur) == (
        ["mobile"],
        kl.id,
        "top10",
        Decimal("9"),
    )
    mobile = await make_schedule(
        runtime, tenant, **{k: getattr(draft, k) for k in draft.__struct_fields__}
    )
    assert mobile.devices == "mobile"
    async with runtime.db.read() as session:
        row = await session.get(Schedule, source.id)
        assert row is not None
        assert row.devices == "desktop"
