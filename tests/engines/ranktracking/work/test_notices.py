"""The pause notice (RT-23) and the activity feed (RT-39): requests without money are skipped and
recorded, the schedule is paused for its balance and its owner told by e-mail; a paused schedule
admits nothing."""

from __future__ import annotations

from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.manual_runs import run_now
from app.engines.ranktracking.work.notices import PauseNotice, send_pause_notice
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from app.sandbox.smtp import SmtpSink
from tests.engines.ranktracking.factories import make_schedule, principal
from tests.factories import Tenant


async def test_rt39_activity_feed_and_rt23_pause_notice_email(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator
) -> None:
    import dataclasses

    from app.engines.ranktracking.money import activity_page

    schedule = await make_schedule(runtime, tenant)
    await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    await run_now(RankTrackingDeps.of(runtime), principal(tenant), schedule.id, "standard")
    async with runtime.db.read() as session:
        kinds = [a.kind for a in (await activity_page(session, tenant.workspace_id, None)).items]
    assert kinds == ["pause_notice", "run_skipped", "run_skipped", "schedule_created"]
    sink = SmtpSink().start()
    try:
        ctx = runtime.context()
        mail = dataclasses.replace(runtime.settings.mail, smtp_host=sink.host, smtp_port=sink.port)
        ctx = dataclasses.replace(ctx, settings=dataclasses.replace(runtime.settings, mail=mail))
        await send_pause_notice(ctx, PauseNotice(schedule_id=schedule.id, notice_id=1))
    finally:
        sink.stop()
    assert [m.to for m in sink.messages] == [[tenant.email]]
    assert "paused" in sink.messages[0].subject
    async with runtime.db.read() as session:
        row = await session.get(Schedule, schedule.id)
        assert row is not None
        assert row.status == "paused_balance"
    launch = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule.id,
        trigger=MANUAL,
        queue="standard",
        now=runtime.clock.now(),
    )
    assert launch.code == "schedule_paused_balance"
