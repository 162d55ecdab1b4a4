"""A CSV with foreign headers imported in a real headless Chromium (FN-78): the columns are
guessed from the headers, one becomes a new custom field, the first rows are shown, and the
import runs with its progress and per-row report."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, CONTACTS_IMPORT_JOB
from app.engines.funnels.models import Contact
from app.runtime import Runtime
from app.scheduling.bulk import run_bulk_job
from tests.factories import Tenant

pytestmark = pytest.mark.browser

CSV = (
    "Email Address,Given name,Family name,Shoe size,Remarks\n"
    "ada@x.test,Ada,Lovelace,38,first\n"
    "bob@x.test,Bob,Builder,44,\n"
    "oops,Carl,Nobody,40,\n"
)


async def test_fn78_a_csv_with_foreign_headers_is_mapped_and_imported(
    signed_in_page: Any, live_url: str, runtime: Runtime, tenant: Tenant
) -> None:
    page = signed_in_page
    await page.goto(f"{live_url}/ui/funnels/contacts/import")
    await page.set_input_files(
        "#import-form input[type=file]",
        files=[{"name": "people.csv", "mimeType": "text/csv", "buffer": CSV.encode()}],
    )
    await page.click("#import-form button[type=submit]")
    await page.wait_for_selector("#mapping-form")
    assert await page.locator("#map-0").input_value() == "email"
    assert await page.locator("#map-1").input_value() == "first_name"
    assert await page.locator("#map-2").input_value() == "last_name"
    assert await page.locator("#map-3").input_value() == ""
    assert await page.locator("#mapping tbody tr").count() == 3
    assert "Lovelace" in await page.locator("#mapping tbody").inner_text()

    await page.select_option("#map-3", "__new__")
    await page.fill("#new-key-3", "shoe_size")
    await page.select_option("#new-type-3", "number")
    await page.click("#start-import")
    await page.wait_for_url("**/ui/funnels/contacts/import/*")
    job_id = int(page.url.rsplit("/", 1)[1])
    await run_bulk_job(
        runtime.context(job_id=f"bulk:{job_id}:0"), CONTACTS_IMPORT, job_id, CONTACTS_IMPORT_JOB
    )
    await page.reload()
    assert await page.locator('[data-counter="created"]').first.inner_text() == "2"
    assert "not an e-mail address" in await page.locator("body").inner_text()
    async with runtime.db.read() as s:
        ada = await s.scalar(select(Contact).where(Contact.email == "ada@x.test"))
    assert ada is not None
    assert (ada.first_name, ada.last_name, ada.fields) == ("Ada", "Lovelace", {"shoe_size": 38})
