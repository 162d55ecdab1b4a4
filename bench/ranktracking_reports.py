"""Position reports of one large schedule: 500 keywords × 2 devices × 52 weekly runs (52,000
results), beside plain SELECTs of the same rows in the same run.

Measured (median of ``--repeat`` rounds, server-side, no HTTP):
- the positions table page: ``positions_page`` (8 runs shown, 100 rows a page, sorted by position)
  and the table's template rendered;
- the same with all 52 runs shown;
- the chart data: visibility and average position over the 52 runs, and one keyword's chart.
Baselines: a plain ``SELECT`` of the rows the table reads (the window's results), and of every
result of the schedule (what the charts aggregate).

    .venv/bin/python bench/ranktracking_reports.py [--keywords 500] [--runs 52] [--url URL]

Without ``--url`` a temporary SQLite file; with a PostgreSQL URL a fresh database is created and
dropped for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jinja2
from cryptography.fernet import Fernet
from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import ManualClock
from app.db.migrate import upgrade
from app.engines.ranktracking.explain import snapshot
from app.engines.ranktracking.explain.discovery import discover
from app.engines.ranktracking.explain.features import feature_history
from app.engines.ranktracking.explain.movements import keyword_movements, schedule_auto_notes
from app.engines.ranktracking.explain_models import SerpSnapshot
from app.engines.ranktracking.models import Request, Result, Run, Schedule
from app.engines.ranktracking.reports.charts import (
    AUTO_NOTE_REQUESTS,
    CHART_POINTS,
    keyword_chart,
    schedule_charts,
)
from app.engines.ranktracking.reports.measurements import measured_runs
from app.engines.ranktracking.reports.positions import TableQuery, positions_page
from app.engines.ranktracking.reports.rivals import competitor_figures, who_gained
from app.platform.models import Organisation, Workspace
from app.settings import load_settings
from app.web.dashboard import ranktracking_reports as reports_ui
from app.wiring import assemble

START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
TEMPLATES = Path(__file__).resolve().parents[1] / "app/web/dashboard/templates"


async def create_database(base_url: str) -> str:
    url = make_url(base_url)
    name = f"sweepline_bench_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    await admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


async def drop_database(db_url: str) -> None:
    url = make_url(db_url)
    admin = create_async_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    await admin.dispose()


async def seed(runtime: Any, keywords: int, runs: int) -> int:
    """One two-device schedule with ``runs`` weekly measured requests (bulk inserts)."""
    rng = random.Random(7)
    words = [f"keyword {k}" for k in range(keywords)]
    async with runtime.db.write() as uow:
        s = uow.session
        org = Organisation(name="bench", created_at=START)
        s.add(org)
        await s.flush()
        ws = Workspace(
            organisation_id=org.id,
            name="bench",
            timezone="UTC",
            ingest_token_hash=uuid.uuid4().hex,
            webhook_secret_encrypted=b"x",
            allow_private_http=False,
            created_at=START,
        )
        s.add(ws)
        await s.flush()
        schedule = Schedule(
            workspace_id=ws.id,
            organisation_id=org.id,
            name="bench",
            keywords=words,
            data_type="serp",
            frequency="weekly",
            depth=100,
            location_code=2840,
            language_code="en",
            domain="example.com",
            competitors=["rival.com", "other.net"],
            devices="desktop,mobile",
            status="active",
            anchor_at=START,
            next_due_at=START,
            retrying=False,
            consecutive_blocks=0,
            consecutive_failures=0,
            created_at=START,
            updated_at=START,
        )
        s.add(schedule)
        await s.flush()
        positions = {(w, d): rng.randint(1, 60) for w in words for d in ("desktop", "mobile")}
        for n in range(runs):
            at = START + timedelta(weeks=n)
            request = Request(
                workspace_id=ws.id,
                schedule_id=schedule.id,
                trigger="recurring",
                queue="standard",
                due_at=at,
                created_at=at,
            )
            s.add(request)
            await s.flush()
            for device in ("desktop", "mobile"):
                run = Run(
                    workspace_id=ws.id,
                    schedule_id=schedule.id,
                    request_id=request.id,
                    data_type="serp",
                    device=device,
                    queue="standard",
                    depth=100,
                    location_code=2840,
                    language_code="en",
                    domain="example.com",
                    keywords=words,
                    status="succeeded",
                    requested=keywords,
                    retrieved=keywords,
                    no_data=0,
                    reserved_micros=0,
                    reservation_state="settled",
                    polls=1,
                    created_at=at,
                    started_at=at,
                    finished_at=at,
                    updated_at=at,
                )
                s.add(run)
                await s.flush()
                rows = []
                for w in words:
                    p = max(1, positions[(w, device)] + rng.randint(-3, 3))
                    positions[(w, device)] = p
                    rows.append(
                        {
                            "run_id": run.id,
                            "schedule_id": schedule.id,
                            "keyword": w,
                            "device": device,
                            "task_id": None,
                            "state": "retrieved",
                            "position": p if p <= 100 else None,
                            "url": f"https://example.com/{w.replace(' ', '-')}",
                            "features": ["organic", "people_also_ask"],
                            "owned_features": [],
                            "competitors": {"rival.com": rng.randint(1, 20), "other.net": None},
                            "fetched_at": at,
                            "fetch_attempts": 0,
                        }
                    )
                await s.execute(insert(Result), rows)
        return int(schedule.id)


async def seed_pages(runtime: Any, schedule_id: int, requests: int) -> int:
    """A stored results page for every result of the last ``requests`` measurements: 100
    organic results (the tracked domain at its position), a feature or two with their owners."""
    rng = random.Random(11)
    pool = [f"site{n}.com" for n in range(400)]
    async with runtime.db.write() as uow:
        s = uow.session
        last = (
            select(Run.request_id)
            .where(Run.schedule_id == schedule_id)
            .order_by(Run.request_id.desc())
            .limit(2 * requests)
        )
        found = await s.execute(
            select(Result.id, Result.position, Result.fetched_at).where(
                Result.run_id.in_(select(Run.id).where(Run.request_id.in_(last)))
            )
        )
        rows = []
        for result_id, position, at in found.all():
            domains = rng.sample(pool, 100)
            if position is not None:
                domains[position - 1] = "example.com"
            page = snapshot.Snapshot(
                o=[
                    (d, f"/{rng.choice(('shop', 'blog', 'guide'))}/{rng.randint(1, 99999)}")
                    for d in domains
                ],
                f=[("people_also_ask", 3, domains[3:5]), ("ai_overview", 1, domains[:3])],
                a=[(d, f"/{rng.randint(1, 9999)}") for d in domains[:3]],
            )
            rows.append(
                {
                    "result_id": result_id,
                    "schedule_id": schedule_id,
                    "body": snapshot.encode(page),
                    "created_at": at,
                }
            )
        await s.execute(insert(SerpSnapshot), rows)
        return len(rows)


def render_table(env: jinja2.Environment, schedule: Schedule, table: Any) -> str:
    return env.get_template("ranktracking/_positions.html").render(
        schedule=schedule,
        table=table,
        tparams=reports_ui.TableParams(sort="position"),
        table_errors=[],
        bands=reports_ui.BANDS,
        feature_filters=reports_ui.FEATURE_FILTERS,
        summaries=reports_ui.summary_rows(table),
        csrf_input="",
    )


async def timed(repeat: int, action: Any) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keywords", type=int, default=500)
    parser.add_argument("--runs", type=int, default=52)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--url", default="")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    db_url = (
        await create_database(args.url)
        if args.url
        else f"sqlite+aiosqlite:///{Path(tmp.name) / 'bench.db'}"
    )
    try:
        await upgrade(db_url)
        settings = load_settings(
            {
                "DATABASE_URL": db_url,
                "ENCRYPTION_KEY": Fernet.generate_key().decode(),
                "SESSION_SECRET": "bench",
            }
        )
        runtime = assemble(settings, ManualClock(START))
        seeded = time.perf_counter()
        schedule_id = await seed(runtime, args.keywords, args.runs)
        pages = await seed_pages(runtime, schedule_id, 13)
        seeded = time.perf_counter() - seeded
        if args.url:
            # A table in service has been vacuumed and analysed by autovacuum: without this the
            # first reads of 52,000 fresh rows pay for setting their hint bits, and the planner
            # plans on an empty table's statistics.
            async with runtime.db.write_engine.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(text("VACUUM ANALYZE"))
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
        async with runtime.db.read() as session:
            schedule = await session.get(Schedule, schedule_id)
            assert schedule is not None
            window_runs = list(
                (
                    await session.execute(
                        select(Run.id)
                        .where(Run.schedule_id == schedule_id)
                        .order_by(Run.id.desc())
                        .limit(2 * 9)
                    )
                ).scalars()
            )

            async def table_page(columns: int) -> None:
                table = await positions_page(
                    session, schedule, TableQuery(sort="position", columns=columns, limit=100)
                )
                assert table.total == args.keywords * 2
                render_table(env, schedule, table)

            async def charts() -> None:
                await schedule_charts(session, schedule_id)
                await keyword_chart(session, schedule_id, "keyword 1", ["rival.com"])

            async def rivals() -> None:
                columns = await measured_runs(session, schedule_id, limit_requests=CHART_POINTS)
                await competitor_figures(session, columns, list(schedule.competitors or []))
                await who_gained(session, schedule)

            async def auto_notes() -> None:
                columns = await measured_runs(session, schedule_id, limit_requests=CHART_POINTS)
                await schedule_auto_notes(session, schedule_id, columns[-AUTO_NOTE_REQUESTS:])

            async def discovered() -> None:
                found = await discover(session, schedule)
                assert found.pages == args.keywords * 2

            async def explained() -> None:
                await keyword_movements(session, schedule, "keyword 1")
                await feature_history(session, schedule, "keyword 1")

            async def plain_pages() -> None:
                rows = await session.execute(
                    text("SELECT result_id, body FROM rt_snapshots WHERE schedule_id = :s"),
                    {"s": schedule_id},
                )
                assert len(rows.all()) == pages

            async def plain_window() -> None:
                rows = await session.execute(
                    text(
                        "SELECT keyword, device, run_id, state, position, url, competitors, "
                        "features, owned_features FROM rt_results WHERE run_id IN "
                        f"({','.join(str(r) for r in window_runs)})"
                    )
                )
                assert len(rows.all()) == len(window_runs) * args.keywords

            async def plain_all() -> None:
                rows = await session.execute(
                    text("SELECT run_id, state, position FROM rt_results WHERE schedule_id = :s"),
                    {"s": schedule_id},
                )
                assert len(rows.all()) == args.keywords * 2 * args.runs

            await table_page(8)  # warm the caches once
            figures = {
                "positions table page (8 runs, 100 rows, rendered)": await timed(
                    args.repeat, lambda: table_page(8)
                ),
                "positions table page (52 runs, 100 rows, rendered)": await timed(
                    args.repeat, lambda: table_page(52)
                ),
                "chart data (schedule charts + one keyword)": await timed(args.repeat, charts),
                "competitors' figures over the runs, and who gained": await timed(
                    args.repeat, rivals
                ),
                "of it: automatic chart notes over the last 13 runs": await timed(
                    args.repeat, auto_notes
                ),
                "competitors found on the latest 1,000 pages": await timed(args.repeat, discovered),
                "keyword page's movements and feature history": await timed(args.repeat, explained),
                "baseline: plain SELECT of every stored page": await timed(
                    args.repeat, plain_pages
                ),
                "baseline: plain SELECT of the table's rows": await timed(
                    args.repeat, plain_window
                ),
                "baseline: plain SELECT of every result": await timed(args.repeat, plain_all),
            }
        await runtime.aclose()
        backend = "PostgreSQL" if args.url else "SQLite"
        print(
            f"{backend}: {args.keywords} keywords × 2 devices × {args.runs} runs "
            f"({args.keywords * 2 * args.runs} results, seeded in {seeded:.1f} s); "
            f"median of {args.repeat}"
        )
        for name, ms in figures.items():
            print(f"  {name:55s} {ms:8.1f} ms")
    finally:
        if args.url:
            await drop_database(db_url)
        tmp.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
