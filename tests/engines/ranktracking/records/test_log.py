"""The schedule log (RT-36): groups of child runs in pages of 50, newest first, with the health of
the last 12 rows; a failed group counts everything unexplained as missing."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import insert

from app.engines.ranktracking.models import Request, Run
from app.engines.ranktracking.records.log import schedule_log
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_schedule
from tests.factories import Tenant


async def test_rt36_log_pages_of_50_newest_first_with_health_of_12(
    runtime: Runtime, tenant: Tenant
) -> None:
    schedule = await make_schedule(runtime, tenant)
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        ids = []
        for i in range(55):
            result = await uow.session.execute(
                insert(Request).returning(Request.id),
                [
                    {
                        "workspace_id": tenant.workspace_id,
                        "schedule_id": schedule.id,
                        "trigger": "recurring",
                        "queue": "standard",
                        "due_at": now,
                        "created_at": now + timedelta(hours=i),
                    }
                ],
            )
            ids.append(result.scalar_one())
        await uow.session.execute(
            insert(Run),
            [
                {
                    "workspace_id": tenant.workspace_id,
                    "schedule_id": schedule.id,
                    "request_id": rid,
                    "data_type": "serp",
                    "device": device,
                    "queue": "standard",
                    "keywords": [],
                    "status": "succeeded" if i % 2 else "failed",
                    "requested": 2,
                    "retrieved": 2 if i % 2 else 0,
                    "no_data": 0,
                    "reserved_micros": 0,
                    "reservation_state": "none",
                    "polls": 0,
                    "created_at": now,
                    "updated_at": now,
                }
                for i, rid in enumerate(ids)
                for device in ("desktop", "mobile")
            ],
        )
    async with runtime.db.read() as session:
        first = await schedule_log(session, schedule.id)
        assert len(first.items) == 50
        assert [g.request_id for g in first.items[:2]] == [ids[-1], ids[-2]]
        assert all(len(g.runs) == 2 for g in first.items)
        assert [h.request_id for h in first.health] == ids[-12:]  # oldest first, last 12 rows
        assert first.next_cursor is not None
        second = await schedule_log(session, schedule.id, before_id=int(first.next_cursor))
        assert [g.request_id for g in second.items] == list(reversed(ids[:5]))
        assert second.next_cursor is None
        assert [h.request_id for h in second.health] == ids[-12:]
        assert (first.items[1].status, first.items[1].missing) == ("succeeded", 0)
        # A failed group: everything unexplained is missing, per child row and in the group.
        assert (first.items[0].status, first.items[0].missing, first.items[0].runs[0].missing) == (
            "failed",
            4,
            2,
        )
