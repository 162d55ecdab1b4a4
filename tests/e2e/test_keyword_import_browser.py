"""A keyword CSV import in a real browser: uploaded from the list's page, it runs as a bulk job
whose progress bar (the contact import's component) moves while the page is open — from queued,
through a first attempt that stopped after two chunks, to done — and ends with its per-entry
report, without the page being reloaded."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from playwright.async_api import expect
from sqlalchemy import func, select

from app.engines.ranktracking.keyword_import import (
    KEYWORDS_IMPORT,
    KEYWORDS_IMPORT_JOB,
    import_step,
)
from app.engines.ranktracking.lists import create_list
from app.engines.ranktracking.models import ListKeyword
from app.runtime import Runtime
from app.scheduling.bulk import BulkKind, Chunk, StepInput, run_bulk_job
from app.settings import BulkSettings
from tests.factories import Tenant

pytestmark = pytest.mark.browser


async def test_a_keyword_csv_import_shows_its_progress_bar(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    runtime.settings = dataclasses.replace(runtime.settings, bulk=BulkSettings(chunk_items=2))
    async with runtime.db.write() as uow:
        kl, _ = await create_list(
            uow.session,
            workspace_id=tenant.workspace_id,
            name="Shoes",
            keywords=["trail shoes"],
            now=runtime.clock.now(),
        )
    page = signed_in_page
    await page.goto(f"{live_url}/ui/ranktracking/lists/{kl.id}")
    # Six entries: one the list has, one repeated in another spelling, one too long.
    csv_text = (
        "keyword\ntrail shoes\nrunning shoes\nhiking boots\nRunning  Shoes\nrain jacket\n"
        + "x" * 300
        + "\n"
    )
    form = page.locator("#keyword-import")
    await form.locator("input[name=file]").set_input_files(
        files=[{"name": "keywords.csv", "mimeType": "text/csv", "buffer": csv_text.encode()}]
    )
    await form.locator("button[type=submit]").click()
    await page.wait_for_url(f"{live_url}/ui/jobs/*")
    job_id = int(page.url.rsplit("/", 1)[1])
    bar = page.locator("#bulk-progress progress")
    await expect(page.locator("#status")).to_have_text("queued")
    await expect(bar).to_have_attribute("value", "0.0")
    await expect(page.locator("#bulk-progress")).to_contain_text("0 of 6 keywords")

    # A first attempt stops after two chunks (its process died): the bar shows what committed.
    chunks = 0

    async def two_chunks(session: Any, step: StepInput) -> Chunk:
        nonlocal chunks
        chunks += 1
        if chunks > 2:
            raise RuntimeError("the worker died")
        return await import_step(session, step)

    with pytest.raises(RuntimeError):
        await run_bulk_job(
            runtime.context(job_id=f"bulk:{job_id}:0"),
            BulkKind(KEYWORDS_IMPORT.name, two_chunks),
            job_id,
            KEYWORDS_IMPORT_JOB,
        )
    await expect(page.locator("#status")).to_have_text("running")
    await expect(page.locator("#bulk-progress")).to_contain_text("4 of 6 keywords")
    assert float(await bar.get_attribute("value") or 0) == pytest.approx(4 / 6, abs=0.001)
    await expect(page.locator("#share")).to_have_text("66.7%")

    # The retry finishes it; the polled fragment stops polling and shows the report.
    await run_bulk_job(
        runtime.context(job_id=f"bulk:{job_id}:0"), KEYWORDS_IMPORT, job_id, KEYWORDS_IMPORT_JOB
    )
    await expect(page.locator("#status")).to_have_text("done")
    await expect(page.get_by_role("link", name="The keyword list")).to_be_visible()
    await expect(bar).to_have_attribute("value", "1.0")
    await expect(page.locator('td[data-counter="added"]')).to_have_text("3")
    await expect(page.locator('td[data-counter="skipped"]')).to_have_text("2")
    await expect(page.locator('td[data-counter="failed"]')).to_have_text("1")
    await expect(page.locator("#item-errors tbody tr")).to_have_count(1)
    await expect(page.locator("#item-errors")).to_contain_text("longer than")
    assert await page.locator("#bulk-progress[hx-trigger]").count() == 0
    async with runtime.db.read() as session:
        count = await session.scalar(
            select(func.count()).select_from(ListKeyword).where(ListKeyword.list_id == kl.id)
        )
    assert count == 4
