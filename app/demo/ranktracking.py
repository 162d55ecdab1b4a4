"""Demo data: a keyword list, two schedules (a two-device SERP one, with an e-mail alert, a weekly
report and tagged keywords, and a keyword-data one), a funded balance, the provider simulator, so
a person sees runs go from dispatching to succeeded, and a Search Console property to import more
keywords from (:mod:`app.demo.search_console`), and a geo-grid of local search
(:mod:`app.demo.ranktracking_local`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.demo import ranktracking_local, search_console
from app.demo.parts import DemoPart
from app.engines.ranktracking import ledger, tags
from app.engines.ranktracking.alerts.report import put_settings
from app.engines.ranktracking.alerts.rules import create_rule
from app.engines.ranktracking.alerts.schemas import AlertRuleIn, ReportSettingsIn
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.lists import create_list
from app.engines.ranktracking.schedules.creation import create_and_baseline
from app.engines.ranktracking.schedules.lookup import lock_schedule
from app.engines.ranktracking.schemas import RankScheduleIn
from app.integrations.http_guard import shared_guard
from app.platform.service import Principal
from app.sandbox.base import start_simulator
from app.sandbox.serp import SerpSimulator

if TYPE_CHECKING:
    from app.demo.parts import DemoWorkspace, SandboxHandle
    from app.runtime import Runtime

DEMO_DOMAIN = "sweepline-demo.com"
DEMO_KEYWORDS = [
    "trail running shoes",
    "waterproof hiking boots",
    "lightweight rain jacket",
    "merino base layer",
    "ultralight tent",
    "down sleeping bag",
    "trekking poles",
    "hydration vest",
]
# Where the demo site ranks, so the results page has something to show (None: beyond the top 100).
DEMO_POSITIONS = [3, 7, 12, 1, None, 45, 9, 28]
DEMO_TAGS = {
    "footwear": ["trail running shoes", "waterproof hiking boots"],
    "camping": ["ultralight tent", "down sleeping bag"],
}
"""Tags on the daily schedule's keywords: its positions table filters by them, its charts
compare them."""


def start_serp_sandbox() -> SandboxHandle:
    """The SERP provider simulator on a loopback port, with the demo site placed in it."""
    sim = SerpSimulator(seed=7, login="demo", password="demo", ready_after_polls=1)  # noqa: S106
    for keyword, position in zip(DEMO_KEYWORDS, DEMO_POSITIONS, strict=True):
        sim.place(keyword, DEMO_DOMAIN, position)
        sim.place(keyword, DEMO_DOMAIN, position + 2 if position else None, device="mobile")
    ranktracking_local.place_shop(sim, DEMO_DOMAIN)
    return start_simulator(sim)


async def seed_demo(runtime: Runtime, demo: DemoWorkspace) -> None:
    now = runtime.clock.now()
    principal = Principal(
        workspace_id=demo.workspace_id,
        organisation_id=demo.organisation_id,
        role="admin",
        user_id=demo.admin_user_id,
    )
    async with runtime.db.write() as uow:
        await ledger.top_up(
            uow.session,
            organisation_id=demo.organisation_id,
            workspace_id=demo.workspace_id,
            amount_micros=50_000_000,
            now=now,
            note="demo credit",
        )
        keyword_list, _ = await create_list(
            uow.session,
            workspace_id=demo.workspace_id,
            name="Outdoor gear",
            keywords=DEMO_KEYWORDS,
            now=now,
        )
    serp, _ = await create_and_baseline(
        RankTrackingDeps.of(runtime),
        principal,
        RankScheduleIn(
            name="Outdoor gear — daily positions",
            data_type="serp",
            frequency="daily",
            list_id=keyword_list.id,
            depth="top100",
            location_code=2840,
            language_code="en",
            domain=DEMO_DOMAIN,
            devices=["desktop", "mobile"],
            monthly_cap_eur=None,
        ),
    )
    await _seed_alerts(runtime, demo, serp.id)
    async with runtime.db.write() as uow:
        schedule = await lock_schedule(uow.session, demo.workspace_id, serp.id)
        for tag, keywords in DEMO_TAGS.items():
            await tags.add_tag(uow.session, schedule, tag, keywords, runtime.clock.now())
    await create_and_baseline(
        RankTrackingDeps.of(runtime),
        principal,
        RankScheduleIn(
            name="Outdoor gear — monthly volumes",
            data_type="keyword_data",
            frequency="monthly",
            list_id=keyword_list.id,
            location_code=2840,
            language_code="en",
            packages=["volume", "cpc"],
        ),
    )
    await ranktracking_local.seed_geogrid(runtime, demo)


async def _seed_alerts(runtime: Runtime, demo: DemoWorkspace, schedule_id: int) -> None:
    """An e-mail alert and a weekly report on the daily schedule (the demo's mailbox shows them)."""
    async with runtime.db.write() as uow:
        schedule = await lock_schedule(uow.session, demo.workspace_id, schedule_id)
        now = runtime.clock.now()
        await create_rule(
            uow.session,
            runtime.secrets,
            shared_guard(runtime.resources, runtime.settings.integrations),
            schedule,
            AlertRuleIn(
                name="Into the top 10",
                kind="enters_top",
                threshold=10,
                recipients=["seo@sweepline-demo.com"],
            ),
            now,
        )
        await put_settings(uow.session, schedule, ReportSettingsIn(period="weekly"), now)


PART = DemoPart(
    name="ranktracking",
    seed=seed_demo,
    sandboxes={"serp": start_serp_sandbox, search_console.SANDBOX: search_console.start_sandbox},
    on_start=search_console.on_start,
)
