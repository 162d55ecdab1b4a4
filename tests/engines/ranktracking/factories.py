"""The position-tracking test builders and fixtures: the provider simulator on loopback (one per
module, reset for each test), a real SMTP server, schedules, keyword lists, money on the balance,
requests launched and collected; and runs seeded through the simulator over several dates, shared
by the report tests (API, exports, browser): three weekly measurements of three keywords on desktop
and mobile. ``conftest.py`` re-exports the fixtures; browser tests import them from here."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import pytest

from app.engines.ranktracking import ledger
from app.engines.ranktracking.amounts import MICROS_PER_CENT, cents_to_micros
from app.engines.ranktracking.claim.admission import MANUAL
from app.engines.ranktracking.claim.handoff import admit_and_send
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.lists import create_list
from app.engines.ranktracking.models import KeywordList, Schedule
from app.engines.ranktracking.schedules.creation import create
from app.engines.ranktracking.schemas import RankScheduleIn
from app.engines.ranktracking.work.poller import poll_ready
from app.engines.ranktracking.work.runs import post_impl
from app.integrations.search_console import SearchConsoleClient
from app.integrations.serp import SerpClient
from app.integrations.sheets import TokenMinter
from app.integrations.sheets.service_account import SERVICE_ACCOUNT_SECRET
from app.platform import service
from app.platform.service import Principal
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.search_console import SearchConsoleSandbox
from app.sandbox.serp import SerpSimulator
from app.sandbox.sheets import SheetsSandbox
from app.sandbox.smtp import SmtpSink
from app.wiring import ranktracking_deps
from tests.factories import Tenant

DOMAIN = "acme-shop.com"


@pytest.fixture(scope="module")
async def served_sim() -> AsyncIterator[SerpSimulator]:
    """One provider simulator on a loopback port per module; each test gets it reset."""
    simulator = SerpSimulator(seed=3, login="acme", password="acme-secret")
    async with simulator_in_loop(simulator):
        yield simulator


@pytest.fixture
def sim(served_sim: SerpSimulator, runtime: Runtime) -> SerpSimulator:
    """The provider simulator, fresh, dating its tasks on the test's clock; the runtime's jobs use
    a client pointed at it (the production client, only the base URL differs)."""
    served_sim.reset()
    served_sim.clock = runtime.clock
    client = SerpClient(served_sim.url, "acme", "acme-secret", retries=0, backoff_seconds=0.0)
    runtime.resources.provide(RankTrackingDeps, lambda: ranktracking_deps(runtime, serp=client))
    return served_sim


@pytest.fixture(scope="module")
async def served_gsc() -> AsyncIterator[SearchConsoleSandbox]:
    """Google's token endpoint and the Search Console API on loopback, one per module."""
    google = SheetsSandbox(api_keys=set(), bearer_tokens=set())  # only minted tokens pass
    console = SearchConsoleSandbox(google=google)
    async with simulator_in_loop(google), simulator_in_loop(console):
        yield console


GSC_PAGE_ROWS = 1000
"""Google's default page: a preview of more queries pages with ``startRow``."""
GSC_TIMEOUT_SECONDS = 0.5


async def _no_wait(_: float) -> None:
    return None


@pytest.fixture
def gsc(
    served_gsc: SearchConsoleSandbox, sim: SerpSimulator, runtime: Runtime
) -> SearchConsoleSandbox:
    """The Search Console simulator and its token endpoint, fresh; the runtime's position
    tracking reads them with the production client and minter (only the base URLs differ; the
    client's retries do not wait, and it gives up on a page after half a second)."""
    served_gsc.reset()
    served_gsc.google.reset()
    serp = SerpClient(sim.url, "acme", "acme-secret", retries=0, backoff_seconds=0.0)
    runtime.resources.provide(
        RankTrackingDeps,
        lambda: dataclasses.replace(
            ranktracking_deps(runtime, serp=serp),
            search_console=SearchConsoleClient(
                served_gsc.url,
                timeout_seconds=GSC_TIMEOUT_SECONDS,
                retry_delays=(0.0,),
                sleep=_no_wait,
                page_rows=GSC_PAGE_ROWS,
            ),
            google_tokens=TokenMinter(f"{served_gsc.google.url}/token", now=runtime.clock.now),
        ),
    )
    return served_gsc


async def store_google_key(runtime: Runtime, tenant: Tenant, key_json: str) -> None:
    """The workspace's service-account key, stored as the Sheets integration stores it."""
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=tenant.workspace_id,
            name=SERVICE_ACCOUNT_SECRET,
            value=key_json,
            now=runtime.clock.now(),
        )


@pytest.fixture
def sink(runtime: Runtime) -> Iterator[SmtpSink]:
    """A real SMTP server on loopback; the runtime's mailer (and its jobs') points at it."""
    server = SmtpSink().start()
    mail = dataclasses.replace(runtime.settings.mail, smtp_host=server.host, smtp_port=server.port)
    runtime.settings = dataclasses.replace(runtime.settings, mail=mail)
    try:
        yield server
    finally:
        server.stop()


def principal(tenant: Tenant) -> Principal:
    return Principal(
        workspace_id=tenant.workspace_id,
        organisation_id=tenant.organisation_id,
        role="admin",
        user_id=tenant.user_id,
    )


KEYWORD_DATA: dict[str, Any] = {
    "data_type": "keyword_data",
    "frequency": "monthly",
    "depth": None,
    "devices": None,
    "domain": None,
    "packages": ["volume"],
}
"""The overrides of :func:`serp_in` that make a keyword-data schedule (search volume, monthly)."""


def serp_in(**overrides: Any) -> RankScheduleIn:
    values: dict[str, Any] = {
        "name": "Positions",
        "data_type": "serp",
        "frequency": "daily",
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": DOMAIN,
        "devices": ["desktop"],
    }
    values.update(overrides)
    if "list_id" not in values and "keywords" not in values:
        values["keywords"] = ["red shoes", "blue shoes"]
    return RankScheduleIn(**values)


async def make_list(
    runtime: Runtime, tenant: Tenant, keywords: list[str], name: str = "Main"
) -> KeywordList:
    async with runtime.db.write() as uow:
        kl, _ = await create_list(
            uow.session,
            workspace_id=tenant.workspace_id,
            name=name,
            keywords=keywords,
            now=runtime.clock.now(),
        )
    return kl


async def make_schedule(runtime: Runtime, tenant: Tenant, **overrides: Any) -> Schedule:
    """A saved schedule without its baseline request (tests drive requests explicitly)."""
    async with runtime.db.write() as uow:
        return await create(
            uow.session,
            runtime.settings.ranktracking,
            principal(tenant),
            serp_in(**overrides),
            runtime.clock.now(),
        )


async def fund(runtime: Runtime, tenant: Tenant, cents: int) -> None:
    """Top up ``cents`` whole cents (or, with :func:`fund_micros`, an exact amount)."""
    await fund_micros(runtime, tenant, cents_to_micros(cents))


async def fund_micros(runtime: Runtime, tenant: Tenant, micros: int) -> None:
    async with runtime.db.write() as uow:
        await ledger.top_up(
            uow.session,
            organisation_id=tenant.organisation_id,
            amount_micros=micros,
            now=runtime.clock.now(),
        )


async def available(runtime: Runtime, tenant: Tenant) -> Decimal:
    """The available balance in cents, exact (sub-cent amounts are fractions of a cent)."""
    return Decimal(await available_micros(runtime, tenant)) / MICROS_PER_CENT


async def available_micros(runtime: Runtime, tenant: Tenant) -> int:
    async with runtime.db.read() as session:
        view = await ledger.balance_of(session, tenant.organisation_id)
        assert (
            await ledger.ledger_available(session, tenant.organisation_id) == view.available_micros
        )
        return view.available_micros


async def launch(runtime: Runtime, schedule_id: int, queue: str = "standard") -> list[int]:
    """A manual request admitted and handed to the queue; the child run ids."""
    out = await admit_and_send(
        RankTrackingDeps.of(runtime),
        schedule_id,
        trigger=MANUAL,
        queue=queue,
        now=runtime.clock.now(),
    )
    assert out.launched, out
    return out.run_ids


async def collect(runtime: Runtime, run_id: int) -> None:
    """Post a dispatching run's tasks to the simulator and collect what is ready."""
    client = RankTrackingDeps.of(runtime).serp
    await post_impl(RankTrackingDeps.of(runtime), client, run_id, final_attempt=False)
    await poll_ready(RankTrackingDeps.of(runtime), client)


# -- runs seeded over several dates, for the reports ---------------------------------------------

KEYWORDS = ["red shoes", "blue shoes", "green shoes"]

# Per measurement: keyword -> (desktop, mobile) position of the tracked domain. At depth top10 a
# position beyond 10 comes back as "not within the depth" (green shoes, mobile, second run).
PLAN: list[dict[str, tuple[int | None, int | None]]] = [
    {"red shoes": (5, 6), "blue shoes": (None, 8), "green shoes": (3, 3)},
    {"red shoes": (2, 6), "blue shoes": (9, None), "green shoes": (3, 12)},
    {"red shoes": (4, 1), "blue shoes": (7, None), "green shoes": (None, 2)},
]


async def measure(
    runtime: Runtime,
    sim: SerpSimulator,
    schedule_id: int,
    plan: dict[str, tuple[int | None, int | None]],
) -> list[int]:
    for keyword, (desktop, mobile) in plan.items():
        sim.place(keyword, DOMAIN, desktop, device="desktop")
        sim.place(keyword, DOMAIN, mobile, device="mobile")
    run_ids = await launch(runtime, schedule_id)
    for run_id in run_ids:
        await collect(runtime, run_id)
    return run_ids


async def seeded_schedule(
    runtime: Runtime, tenant: Tenant, sim: SerpSimulator, **overrides: object
) -> Schedule:
    """A two-device schedule measured once a week for three weeks (PLAN)."""
    await fund(runtime, tenant, 10_000)
    values: dict[str, object] = {"keywords": KEYWORDS, "devices": ["desktop", "mobile"]}
    values.update(overrides)
    schedule = await make_schedule(runtime, tenant, **values)
    for plan in PLAN:
        await measure(runtime, sim, schedule.id, plan)
        runtime.clock.advance(days=7)  # type: ignore[attr-defined]
    return schedule


# -- two measurements that move, for the explanations -------------------------------------------

RIVAL = "rival.com"


async def explained_schedule(runtime: Runtime, tenant: Tenant, sim: SerpSimulator) -> Schedule:
    """Two daily measurements (desktop, top 100) of "red shoes" and "blue shoes". Run 1: the site
    3rd on /red-shoes, the rival 8th, a featured snippet. Run 2: the rival 2nd, the site 5th on
    another page, an AI Overview citing the rival, a local pack and videos; on "blue shoes" the
    rival passes the site (4th) from 6th to 1st."""
    await fund(runtime, tenant, 10_000)
    schedule = await make_schedule(runtime, tenant, depth="top100")
    sim.place("red shoes", DOMAIN, 3, path="/red-shoes")
    sim.place("red shoes", RIVAL, 8)
    sim.place("blue shoes", DOMAIN, 4)
    sim.place("blue shoes", RIVAL, 6)
    sim.script("red shoes", features=["featured_snippet"])
    await measure_once(runtime, schedule.id)
    sim.place("red shoes", DOMAIN, 5, path="/shoes-sale")
    sim.place("red shoes", RIVAL, 2)
    sim.place("blue shoes", RIVAL, 1)
    sim.script(
        "red shoes",
        features=["ai_overview", "local_pack", "video"],
        ai_references=[RIVAL, "wiki-shoes.org"],
    )
    await measure_once(runtime, schedule.id)
    return schedule


async def measure_once(runtime: Runtime, schedule_id: int) -> None:
    """One manual request collected, then a day later."""
    for run_id in await launch(runtime, schedule_id):
        await collect(runtime, run_id)
    runtime.clock.advance(days=1)  # type: ignore[attr-defined]
