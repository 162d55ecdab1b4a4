"""Duplicate for mobile (RT-17)."""

from __future__ import annotations

from decimal import Decimal

from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.drafts import mobile_draft
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list, make_schedule
from tests.factories import Tenant


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
