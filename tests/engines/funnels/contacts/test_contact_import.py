"""CSV import of contacts as a bulk job: checked on submission (422, nothing written), applied
in chunks with a per-row report, resumable after a crash, progress in the job status endpoint
(workspace-scoped), tags per contact bounded."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.engines.funnels.contacts.csv_import import (
    CONTACTS_IMPORT,
    CONTACTS_IMPORT_JOB,
    import_step,
)
from app.engines.funnels.contacts.memberships import MAX_TAGS_PER_CONTACT
from app.engines.funnels.models import Contact, ContactEvent, ContactTag
from app.engines.funnels.runs.due.enrolment import ENROLMENT, ENROLMENT_JOB
from app.runtime import Runtime
from app.scheduling.bulk import BulkKind, Chunk, StepInput, bulk_job_spec, run_bulk_job
from app.scheduling.bulk_models import BulkJob
from app.settings import BulkSettings
from tests.conftest import auth
from tests.factories import Tenant

API = "/api/v1/funnels"


async def _post(client: httpx.AsyncClient, tenant: Tenant, path: str, body: Any) -> httpx.Response:
    return await client.post(f"{API}{path}", json=body, headers=auth(tenant))


async def _run(runtime: Runtime, job_id: int, kind: BulkKind = CONTACTS_IMPORT) -> None:
    """Run the queued bulk job to its end in this task (what a worker does)."""
    spec = (
        CONTACTS_IMPORT_JOB
        if kind is CONTACTS_IMPORT
        else ENROLMENT_JOB
        if kind is ENROLMENT
        else bulk_job_spec(kind)
    )
    await run_bulk_job(runtime.context(job_id=f"bulk:{job_id}:0"), kind, job_id, spec)


def _small_chunks(runtime: Runtime, items: int) -> None:
    runtime.settings = dataclasses.replace(
        runtime.settings, bulk=BulkSettings(chunk_items=items, max_import_rows=50)
    )


async def test_import_runs_as_a_job_with_a_per_row_report(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    _small_chunks(runtime, 2)
    await _post(client, tenant, "/fields", {"key": "orders", "type": "number"})
    await _post(client, tenant, "/contacts", {"email": "known@x.test", "first_name": "Old"})
    csv_text = (
        "email,first_name,timezone,orders,tags\n"
        "a@x.test,Ada,Europe/Berlin,3,vip;newsletter\n"
        ",Nobody,UTC,1,\n"
        "b@x.test,Bad,UTC,many,\n"
        "\n"
        "c@x.test,Zone,Nowhere/City,1,\n"
        "known@x.test,New,UTC,2,\n"
        'd@x.test,"Multi\nLine",UTC,1,vip\n'
        "a@x.test,Ada again,,4,friend\n"
        "e@x.test,Too,UTC,1,,extra\n"
    )
    response = await _post(client, tenant, "/contacts/import", {"csv": csv_text})
    assert response.status_code == 202, response.text
    job = response.json()
    assert (job["status"], job["total"], job["processed"]) == ("queued", 8, 0)
    assert job["url"] == f"/api/v1/jobs/{job['id']}"
    # Nothing is written before the job runs.
    listed = (await client.get(f"{API}/contacts", headers=auth(tenant))).json()["items"]
    assert [c["email"] for c in listed] == ["known@x.test"]

    await _run(runtime, job["id"])

    done = (await client.get(job["url"], headers=auth(tenant))).json()
    assert done["status"] == "done"
    assert (done["processed"], done["progress"]) == (8, 1.0)
    assert done["counters"] == {"created": 2, "updated": 2, "failed": 4}
    assert [(e["item"], e["field"]) for e in done["errors"]] == [
        (3, "email"),
        (4, "fields.orders"),
        (5, "timezone"),
        (9, ""),
    ]
    assert "extra" not in done["errors"][3]["message"]
    assert "values" in done["errors"][3]["message"]
    listed = (await client.get(f"{API}/contacts", headers=auth(tenant))).json()["items"]
    by_email = {c["email"]: c for c in listed}
    assert set(by_email) == {"known@x.test", "a@x.test", "d@x.test"}
    # The repeated address updated the contact the earlier row created, and only added tags.
    assert by_email["a@x.test"]["first_name"] == "Ada again"
    assert by_email["a@x.test"]["timezone"] == "Europe/Berlin"
    assert by_email["a@x.test"]["fields"] == {"orders": 4}
    assert by_email["a@x.test"]["tags"] == ["friend", "newsletter", "vip"]
    assert by_email["d@x.test"]["first_name"] == "Multi\nLine"
    assert by_email["known@x.test"]["first_name"] == "New"

    # The whole report pages through /errors; another workspace sees no job.
    page = (await client.get(f"{job['url']}/errors?limit=3", headers=auth(tenant))).json()
    assert [e["item"] for e in page["items"]] == [3, 4, 5]
    rest = await client.get(
        f"{job['url']}/errors?limit=3&cursor={page['next_cursor']}", headers=auth(tenant)
    )
    assert [e["item"] for e in rest.json()["items"]] == [9]
    assert (await client.get(job["url"], headers=auth(other_tenant))).status_code == 404
    assert (await client.get(f"{job['url']}/errors", headers=auth(other_tenant))).status_code == 404
    assert (await client.get("/api/v1/jobs", headers=auth(other_tenant))).json()["items"] == []
    mine = (await client.get("/api/v1/jobs", headers=auth(tenant))).json()["items"]
    assert [j["id"] for j in mine] == [job["id"]]
    # The upload is not kept once applied; the report is.
    async with runtime.db.read() as session:
        assert await session.scalar(select(BulkJob.source).where(BulkJob.id == job["id"])) == ""
        created_events = await session.scalar(
            select(func.count())
            .select_from(ContactEvent)
            .where(ContactEvent.name == "contact_created")
        )
        tag_events = await session.scalar(
            select(func.count()).select_from(ContactEvent).where(ContactEvent.name == "tag_added")
        )
    assert created_events == 3  # known@ (API), a@, d@
    assert tag_events == 4  # vip, newsletter, friend on a@; vip on d@


async def test_a_retried_submission_answers_the_same_job(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    headers = {**auth(tenant), "Idempotency-Key": "import-1"}
    body = {"csv": "email\nx@x.test\n"}
    first = await client.post(f"{API}/contacts/import", json=body, headers=headers)
    again = await client.post(f"{API}/contacts/import", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert len((await client.get("/api/v1/jobs", headers=auth(tenant))).json()["items"]) == 1


async def test_the_file_is_checked_before_anything_is_written(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _small_chunks(runtime, 2)

    async def refused(body: dict[str, Any]) -> dict[str, Any]:
        response = await _post(client, tenant, "/contacts/import", body)
        assert response.status_code == 422, response.text
        return dict(response.json())

    assert "email" in (await refused({"csv": "first_name\nx\n"}))["message"]
    assert "empty" in (await refused({"csv": ""}))["message"]
    assert (
        "unknown columns: plan" in (await refused({"csv": "email,plan\na@x.test,pro\n"}))["message"]
    )
    assert (await refused({"csv": "email\n" + "a@x.test\n" * 51}))["details"][0]["code"] == (
        "too_many_rows"
    )
    assert (await refused({"csv": "email\na@x.test\n", "columns": {"nope": "email"}}))["details"][
        0
    ]["field"] == "columns.nope"
    assert (
        "more than one column"
        in (
            await refused({"csv": "email,mail\na@x.test,b@x.test\n", "columns": {"mail": "email"}})
        )["message"]
    )
    assert (await client.get("/api/v1/jobs", headers=auth(tenant))).json()["items"] == []


async def test_columns_can_be_mapped_or_left_out(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    csv_text = "E-mail,Vorname,Notiz,Labels\nA@X.test,Ada,ignore me,vip\n"
    response = await _post(
        client,
        tenant,
        "/contacts/import",
        {
            "csv": csv_text,
            "columns": {"E-mail": "email", "Vorname": "first_name", "Notiz": "", "Labels": "tags"},
        },
    )
    assert response.status_code == 202, response.text
    await _run(runtime, response.json()["id"])
    [contact] = (await client.get(f"{API}/contacts", headers=auth(tenant))).json()["items"]
    assert (contact["email"], contact["first_name"], contact["tags"]) == (
        "a@x.test",
        "Ada",
        ["vip"],
    )


async def test_a_crash_mid_chunk_resumes_after_the_last_committed_chunk(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """The third chunk fails after applying its rows (as a killed process would): it rolls back
    whole, the retry resumes there, and every row is applied exactly once."""
    _small_chunks(runtime, 3)
    rows = [f"p{i}@x.test,P{i},t{i % 4}" for i in range(1, 13)]
    csv_text = "email,first_name,tags\n" + "\n".join(rows) + "\n"
    job_id = (await _post(client, tenant, "/contacts/import", {"csv": csv_text})).json()["id"]

    calls = 0

    async def crashing_step(session: Any, step: StepInput) -> Chunk:
        nonlocal calls
        calls += 1
        chunk = await import_step(session, step)
        if calls == 3:
            raise RuntimeError("killed mid-chunk")
        return chunk

    crashing = BulkKind(CONTACTS_IMPORT.name, crashing_step)
    with pytest.raises(RuntimeError):
        await _run(runtime, job_id, crashing)
    half = (await client.get(f"/api/v1/jobs/{job_id}", headers=auth(tenant))).json()
    assert (half["status"], half["processed"]) == ("running", 6)
    assert "killed mid-chunk" in half["last_error"]
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Contact)) == 6

    await _run(runtime, job_id)  # the queue's retry
    done = (await client.get(f"/api/v1/jobs/{job_id}", headers=auth(tenant))).json()
    assert (done["status"], done["processed"], done["counters"]["created"]) == ("done", 12, 12)
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Contact)) == 12
        assert await session.scalar(select(func.count()).select_from(ContactTag)) == 12
        assert (
            await session.scalar(
                select(func.count())
                .select_from(ContactEvent)
                .where(ContactEvent.name == "contact_created")
            )
            == 12
        )


async def test_a_cancelled_import_stops_after_its_chunk(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _small_chunks(runtime, 2)
    csv_text = "email\n" + "".join(f"c{i}@x.test\n" for i in range(10))
    job_id = (await _post(client, tenant, "/contacts/import", {"csv": csv_text})).json()["id"]
    cancelled = await client.post(f"/api/v1/jobs/{job_id}/cancel", headers=auth(tenant))
    assert cancelled.json()["status"] == "cancelled"
    await _run(runtime, job_id)
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Contact)) == 0


async def test_tags_per_contact_are_bounded(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    too_many = [f"t{i}" for i in range(MAX_TAGS_PER_CONTACT + 1)]
    refused = await _post(client, tenant, "/contacts", {"email": "a@x.test", "tags": too_many})
    assert refused.status_code == 422, refused.text
    assert refused.json()["details"][0]["field"] == "tags"
    long_name = await _post(client, tenant, "/contacts", {"email": "a@x.test", "tags": ["x" * 101]})
    assert long_name.status_code == 422

    # The most a contact may hold is written in a few statements, with one event per tag.
    full = [f"t{i}" for i in range(MAX_TAGS_PER_CONTACT)]
    created = await _post(client, tenant, "/contacts", {"email": "a@x.test", "tags": full})
    assert created.status_code == 201, created.text
    assert len(created.json()["tags"]) == MAX_TAGS_PER_CONTACT

    # An import row that would take a contact over the bound is refused; the others are kept.
    csv_text = "email,tags\na@x.test,t1;extra\nb@x.test,t1\n"
    job_id = (await _post(client, tenant, "/contacts/import", {"csv": csv_text})).json()["id"]
    await _run(runtime, job_id)
    done = (await client.get(f"/api/v1/jobs/{job_id}", headers=auth(tenant))).json()
    assert done["counters"] == {"created": 1, "updated": 0, "failed": 1}
    assert [(e["item"], e["field"]) for e in done["errors"]] == [(2, "tags")]
    contact = (await client.get(f"{API}/contacts?q=a@x.test", headers=auth(tenant))).json()
    assert "extra" not in contact["items"][0]["tags"]

    # Re-adding tags it already has is no growth.
    again = await _post(client, tenant, "/contacts/import", {"csv": "email,tags\na@x.test,t1;t2\n"})
    await _run(runtime, again.json()["id"])
    done = (await client.get(f"/api/v1/jobs/{again.json()['id']}", headers=auth(tenant))).json()
    assert done["counters"] == {"created": 0, "updated": 1, "failed": 0}


async def test_the_dashboard_starts_an_import_and_shows_its_progress(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    from tests.platform.conftest import csrf_from, sign_in

    _small_chunks(runtime, 2)
    await sign_in(client, tenant.email, tenant.password)
    form = await client.get("/ui/funnels/contacts/import")
    assert form.status_code == 200
    token = csrf_from(form.text)
    csv_text = "email,first_name\nu1@x.test,U1\nbroken,U2\nu3@x.test,U3\nu4@x.test,U4\n"
    mapping = await client.post(
        "/ui/funnels/contacts/import",
        data={"_csrf_token": token},
        files={"file": ("people.csv", csv_text.encode(), "text/csv")},
    )
    assert mapping.status_code == 200, mapping.text
    started = await client.post(
        "/ui/funnels/contacts/import/mapped",
        data={"_csrf_token": token, "csv": csv_text, "map_0": "email", "map_1": "first_name"},
    )
    assert started.status_code == 303, started.text
    job_page = started.headers["location"]
    running = await client.get(job_page)
    assert running.status_code == 200
    # While it runs, the progress fragment polls itself.
    assert f'hx-get="{job_page}/progress"' in running.text
    assert 'value="0.0"' in running.text

    await _run(runtime, int(job_page.rsplit("/", 1)[1]))
    ended = await client.get(f"{job_page}/progress")
    assert "hx-trigger" not in ended.text
    assert 'value="1.0"' in ended.text
    assert "not an e-mail address" in ended.text
    assert '<td data-counter="created">3</td>' in ended.text

    refused = await client.post(
        "/ui/funnels/contacts/import/mapped",
        data={"_csrf_token": token, "csv": "name\nx\n", "map_0": ""},
    )
    assert refused.status_code == 422
    assert "needs an &#39;email&#39; column" in refused.text


async def test_manual_entry_of_many_contacts_is_bounded_and_batched(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """Entering a whole workspace is a few multi-row statements; a list of ids is bounded."""
    from app.engines.funnels.models import Run

    csv_text = "email,tags\n" + "".join(f"m{i}@x.test,member\n" for i in range(1200))
    job_id = (await _post(client, tenant, "/contacts/import", {"csv": csv_text})).json()["id"]
    await _run(runtime, job_id)
    funnel = await _post(
        client,
        tenant,
        "",
        {
            "name": "Everyone",
            "definition": {
                "triggers": [{"kind": "manual"}],
                "nodes": [{"kind": "goal", "id": "end", "entry": True, "label": "in"}],
            },
        },
    )
    assert funnel.status_code == 201, funnel.text
    fid = funnel.json()["id"]
    assert (await _post(client, tenant, f"/{fid}/publish", {})).status_code in (200, 201)
    too_many = await _post(client, tenant, f"/{fid}/enroll", {"contact_ids": list(range(10_001))})
    assert too_many.status_code == 422
    everyone = await _post(
        client,
        tenant,
        f"/{fid}/enroll",
        {"predicate": {"kind": "has_tag", "tag": "member"}},
    )
    assert everyone.status_code == 200, everyone.text
    # The first chunk at once, the rest in chunks of a bulk job (issue 11 item 4).
    first = everyone.json()
    assert first["started"] == runtime.settings.bulk.chunk_items
    await _run(runtime, int(first["job"].rsplit("/", 1)[1]), ENROLMENT)
    rest = (await client.get(first["job"], headers=auth(tenant))).json()
    assert rest["counters"]["started"] == 1200
    again = await _post(
        client, tenant, f"/{fid}/enroll", {"predicate": {"kind": "has_tag", "tag": "member"}}
    )
    assert again.json()["started"] == 0
    await _run(runtime, int(again.json()["job"].rsplit("/", 1)[1]), ENROLMENT)
    repeat = (await client.get(again.json()["job"], headers=auth(tenant))).json()
    assert repeat["counters"]["started"] == 0
    async with runtime.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Run)) == 1200
