"""The column-mapping step of a CSV import (FN-78): guesses from the header, the first rows shown,
a custom field created on the spot, then the import as always; a mapping the import refuses is
shown again with the person's choices and nothing written."""

from __future__ import annotations

import re

import httpx
from sqlalchemy import func, select

from app.engines.funnels.contacts.column_mapping import PREVIEW_ROWS, field_key, guesses, sample
from app.engines.funnels.contacts.csv_import import CONTACTS_IMPORT, CONTACTS_IMPORT_JOB
from app.engines.funnels.models import Contact, FieldDefinition
from app.runtime import Runtime
from app.scheduling.bulk import run_bulk_job
from app.scheduling.bulk_models import BulkJob
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

IMPORT = "/ui/funnels/contacts/import"


def test_fn78_guesses_come_from_the_header() -> None:
    header = [
        "Email Address",
        "Given name",
        "Surname",
        "E-mail",
        "Mobile",
        "Shoe size",
        "Plan",
        "Whatever",
        "Tags",
    ]
    fields = {"shoe_size": "number", "plan_name": "text"}
    labels = {"shoe_size": "", "plan_name": "Plan"}
    assert guesses(header, fields, labels) == [
        "email",
        "first_name",
        "last_name",
        "",  # e-mail again: the first column keeps it
        "phone",
        "shoe_size",
        "plan_name",
        "",
        "tags",
    ]
    assert field_key("Shoe size (EU)") == "shoe_size_eu"
    assert field_key("2nd choice") == "field_2nd_choice"


def test_fn78_the_sample_is_the_first_ten_rows() -> None:
    text = "a,b\n" + "".join(f"{i},x\n" for i in range(25)) + "short\n"
    shown = sample(text)
    assert shown.header == ["a", "b"]
    assert len(shown.rows) == PREVIEW_ROWS
    assert shown.rows[0] == ["0", "x"]


async def _mapping_page(client: httpx.AsyncClient, tenant: Tenant, text: str) -> tuple[str, str]:
    await sign_in(client, tenant.email, tenant.password)
    form = await client.get(IMPORT)
    token = csrf_from(form.text)
    shown = await client.post(
        IMPORT,
        data={"_csrf_token": token},
        files={"file": ("people.csv", text.encode(), "text/csv")},
    )
    assert shown.status_code == 200, shown.text
    return token, shown.text


def _selected(html: str, index: int) -> str:
    select = re.search(rf'<select name="map_{index}".*?</select>', html, re.S)
    assert select is not None
    chosen = re.search(r'<option value="([^"]*)" selected>', select.group(0))
    return chosen.group(1) if chosen else ""


async def test_fn78_foreign_headers_are_mapped_a_field_created_and_imported(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    text = (
        "Email Address,Given name,Shoe size,Notes\n"
        "ada@x.test,Ada,38,likes tea\n"
        "bob@x.test,Bob,44,\n"
        "not-an-address,Carl,40,\n"
    )
    token, html = await _mapping_page(client, tenant, text)
    assert [_selected(html, i) for i in range(4)] == ["email", "first_name", "", ""]
    assert "likes tea" in html  # the first rows are shown

    started = await client.post(
        f"{IMPORT}/mapped",
        data={
            "_csrf_token": token,
            "csv": text,
            "map_0": "email",
            "map_1": "first_name",
            "map_2": "__new__",
            "new_key_2": "shoe_size",
            "new_type_2": "number",
            "map_3": "",
        },
    )
    assert started.status_code == 303, started.text
    job_id = int(started.headers["location"].rsplit("/", 1)[1])
    await run_bulk_job(
        runtime.context(job_id=f"bulk:{job_id}:0"), CONTACTS_IMPORT, job_id, CONTACTS_IMPORT_JOB
    )
    async with runtime.db.read() as s:
        field = await s.scalar(select(FieldDefinition).where(FieldDefinition.key == "shoe_size"))
        assert field is not None
        assert (field.type, field.label) == ("number", "Shoe size")
        people = {
            c.email: c
            for c in await s.scalars(
                select(Contact).where(Contact.workspace_id == tenant.workspace_id)
            )
        }
        job = await s.get(BulkJob, job_id)
    assert people["ada@x.test"].first_name == "Ada"
    assert people["ada@x.test"].fields == {"shoe_size": 38}
    assert "Notes" not in str(people["bob@x.test"].fields)
    assert job is not None
    assert job.counters["created"] == 2
    assert job.error_count == 1  # the per-row report names the bad address
    report = await client.get(started.headers["location"])
    assert "not an e-mail address" in report.text


async def test_fn78_a_refused_mapping_is_shown_again_and_nothing_is_written(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    text = "Email Address,Size\nada@x.test,38\n"
    token, _ = await _mapping_page(client, tenant, text)
    cases = [
        (
            {"map_0": "email", "map_1": "__new__", "new_key_1": "2 bad", "new_type_1": "number"},
            "Size",
        ),
        ({"map_0": "", "map_1": ""}, "email"),
        ({"map_0": "email", "map_1": "email"}, "more than one column"),
    ]
    for chosen, said in cases:
        refused = await client.post(
            f"{IMPORT}/mapped", data={"_csrf_token": token, "csv": text, **chosen}
        )
        assert refused.status_code == 422, refused.text
        assert said in refused.text
        assert 'id="mapping-form"' in refused.text
        assert _selected(refused.text, 1) == chosen["map_1"]
    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(FieldDefinition)) == 0
        assert await s.scalar(select(func.count()).select_from(BulkJob)) == 0
