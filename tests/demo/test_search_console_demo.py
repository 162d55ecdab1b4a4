"""The demo's Search Console (RT-68): the demo workspace reads the loopback simulator's property
with the production client, also after a restart (a new simulator that never issued the stored
key), and the demo's daily schedule carries tags (RT-70). The ad rules' Sheets custom metric
still reads the demo sheet, now through the shared service-account key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.db.session import Database
from app.demo import ensure_demo, settings_for_sandboxes, simulated, start_sandboxes
from app.demo.ranktracking import DEMO_TAGS
from app.demo.search_console import DEMO_ACCOUNT, DEMO_PROPERTY, DEMO_URL_PROPERTY
from app.engines.adrules.work.sheets_values import workspace_credentials
from app.engines.ranktracking import search_console, tags
from app.engines.ranktracking.deps import RankTrackingDeps
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schemas import SearchConsolePreviewIn
from app.integrations.sheets import ServiceAccount, SheetsClient
from app.integrations.sheets.client import a1_range
from app.runtime import Runtime
from app.sandbox.meta.demo import DEMO_SHEET_ID, DEMO_SHEET_NAME
from app.settings import Settings
from app.wiring import assemble
from tests.conftest import START, truncate_all, with_own_queue


@pytest.fixture
async def clean(shared_db: Database) -> AsyncIterator[Database]:
    yield shared_db
    await truncate_all(shared_db)


async def _start(settings: Settings, db: Database) -> tuple[Runtime, list[object], int]:
    handles = start_sandboxes(simulated({}))
    urls = {name: h.url for name, h in handles.items()}
    rt = assemble(settings_for_sandboxes(with_own_queue(settings), urls), ManualClock(START), db=db)
    await ensure_demo(rt, urls)
    async with rt.db.read() as session:
        workspace_id = await session.scalar(
            select(Schedule.workspace_id).where(Schedule.data_type == "serp")
        )
    assert workspace_id is not None
    return rt, list(handles.values()), workspace_id


async def _stop(rt: Runtime, handles: list[object]) -> None:
    await rt.stop()
    await rt.resources.aclose()
    await rt.queue.aclose()
    for handle in handles:
        handle.stop()  # type: ignore[attr-defined]


async def _preview_keywords(rt: Runtime) -> list[str]:
    deps = RankTrackingDeps.of(rt)
    google = search_console.Google(deps.search_console, deps.google_tokens, deps.secrets)
    end = rt.clock.now().date() - timedelta(days=2)
    async with rt.db.read() as session:
        schedule = (
            await session.scalars(select(Schedule).where(Schedule.data_type == "serp"))
        ).one()
        found = await search_console.properties(session, google, schedule.workspace_id)
        assert [p.site_url for p in found] == sorted([DEMO_PROPERTY, DEMO_URL_PROPERTY])
        preview = await search_console.preview(
            session,
            google,
            schedule,
            SearchConsolePreviewIn(
                site_url=DEMO_PROPERTY,
                start_date=(end - timedelta(days=27)).isoformat(),
                end_date=end.isoformat(),
                min_impressions=100,
            ),
            rt.settings.ranktracking,
            rt.clock.now(),
        )
    assert any(q.tracked for q in preview.queries)
    assert any(not q.tracked for q in preview.queries)
    return [q.keyword for q in preview.queries]


async def test_rt68_the_demo_imports_from_its_search_console_across_restarts(
    settings: Settings, clean: Database
) -> None:
    rt, handles, workspace_id = await _start(settings, clean)
    try:
        first = await _preview_keywords(rt)
        assert first[0] == "trail running shoes"
        async with rt.db.read() as session:
            schedule = (
                await session.scalars(select(Schedule).where(Schedule.data_type == "serp"))
            ).one()
            listed = await tags.schedule_tags(session, schedule.id)
            assert {t.tag: t.keyword_count for t in listed.tags} == {
                tag: len(keywords) for tag, keywords in DEMO_TAGS.items()
            }
        # The ad rules' sheet reads with the same key, its tokens from the same endpoint.
        credentials = await workspace_credentials(
            rt.db, rt.secrets, workspace_id, minter=RankTrackingDeps.of(rt).google_tokens
        )
        assert isinstance(credentials, ServiceAccount)
        client = SheetsClient(rt.settings.integrations.sheets_url)
        try:
            rows = await client.get_values(
                DEMO_SHEET_ID, a1_range(DEMO_SHEET_NAME, "A:C"), credentials
            )
        finally:
            await client.aclose()
        assert rows[0] == ["Campaign id", "Campaign", "Priority"]
    finally:
        await _stop(rt, handles)

    # A restart: new simulators, the demo already seeded; the stored key is told to them.
    rt, handles, _ = await _start(settings, clean)
    try:
        assert await _preview_keywords(rt) == first
    finally:
        await _stop(rt, handles)
    assert DEMO_ACCOUNT.endswith(".iam.gserviceaccount.com")
