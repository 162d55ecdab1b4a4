"""Runs seeded through the SERP simulator over several dates, shared by the report tests (API,
exports, browser): three weekly measurements of three keywords on desktop and mobile."""

from __future__ import annotations

from app.engines.ranktracking.models import Schedule
from app.runtime import Runtime
from app.sandbox.serp import SerpSimulator
from tests.engines.ranktracking.conftest import DOMAIN, collect, fund, launch, make_schedule
from tests.factories import Tenant

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
