"""Bulk enrolment in bounded chunks (issue 11 item 4): the ``manual`` trigger for more contacts
than one chunk enters the first chunk at once and the rest through a bulk job, whose progress
and ``started`` count are in the job status API; a chunk that fails resumes after the last
committed one with one run per contact; contacts created meanwhile are not entered; a segment
entry takes the same path."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest
from sqlalchemy import func, insert, select

from app.engines.funnels.models import Contact, Run
from app.engines.funnels.runs.due.enrolment import ENROLMENT, ENROLMENT_JOB, enrolment_step
from app.runtime import Runtime
from app.scheduling.bulk import BulkKind, Chunk, StepInput, run_bulk_job
from app.settings import BulkSettings
from tests.conftest import auth
from tests.engines.funnels.test_api import API, WELCOME
from tests.factories import Tenant

pytestmark = pytest.mark.usefixtures("runtime")


async def _post(client: httpx.AsyncClient, tenant: Tenant, path: str, body: Any) -> httpx.Response:
    return await client.post(f"{API}{path}", json=body, headers=auth(tenant))


async def _setup(client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, n: int) -> int:
    runtime.settings = dataclasses.replace(runtime.settings, bulk=BulkSettings(chunk_items=4))
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": tenant.workspace_id,
                    "email": f"e{i:03d}@x.test",
                    "first_name": "Keep" if i % 5 else "Skip",
                    "last_name": "",
                    "timezone": "UTC",
                    "fields": {},
                    "consent": {},
                    "suppressed": {},
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(n)
            ],
        )
    fid = (await _post(client, tenant, "", {"name": "Welcome", "definition": WELCOME})).json()["id"]
    await _post(client, tenant, f"/{fid}/publish", {})
    return int(fid)


async def _run(runtime: Runtime, url: str, kind: BulkKind = ENROLMENT) -> None:
    job_id = int(url.rsplit("/", 1)[1])
    await run_bulk_job(runtime.context(job_id=f"bulk:{job_id}:0"), kind, job_id, ENROLMENT_JOB)


async def _runs(runtime: Runtime, fid: int) -> tuple[int, int]:
    """(runs, distinct contacts with a run) of the funnel."""
    async with runtime.db.read() as s:
        row = (
            await s.execute(
                select(func.count(), func.count(func.distinct(Run.contact_id))).where(
                    Run.funnel_id == fid
                )
            )
        ).one()
    return int(row[0]), int(row[1])


KEEP = {"predicate": {"kind": "field", "field": "first_name", "op": "eq", "value": "Keep"}}


async def test_a_large_enrolment_continues_as_a_bulk_job(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    fid = await _setup(client, runtime, tenant, 25)  # 20 named Keep
    entered = await _post(client, tenant, f"/{fid}/enroll", KEEP)
    assert entered.status_code == 200, entered.text
    body = entered.json()
    assert body["started"] == 4
    job = (await client.get(body["job"], headers=auth(tenant))).json()
    assert (job["kind"], job["status"], job["processed"], job["total"]) == (
        "funnels.enrolment",
        "queued",
        4,
        20,
    )
    assert (await client.get(body["job"], headers=auth(other_tenant))).status_code == 404
    assert await _runs(runtime, fid) == (4, 4)
    # Who is created now is not part of this enrolment.
    await _post(client, tenant, "/contacts", {"email": "late@x.test", "first_name": "Keep"})
    await _run(runtime, body["job"])
    done = (await client.get(body["job"], headers=auth(tenant))).json()
    assert (done["status"], done["processed"], done["counters"]) == ("done", 20, {"started": 20})
    assert await _runs(runtime, fid) == (20, 20)


async def test_a_failed_enrolment_chunk_resumes_with_one_run_per_contact(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    fid = await _setup(client, runtime, tenant, 30)  # 24 named Keep
    body = (await _post(client, tenant, f"/{fid}/enroll", KEEP)).json()
    calls = 0

    async def crashing(session: Any, step: StepInput) -> Chunk:
        nonlocal calls
        calls += 1
        chunk = await enrolment_step(session, step)
        if calls == 3:
            raise RuntimeError("killed mid-chunk")
        return chunk

    with pytest.raises(RuntimeError):
        await _run(runtime, body["job"], BulkKind(ENROLMENT.name, crashing))
    half = (await client.get(body["job"], headers=auth(tenant))).json()
    assert (half["status"], half["processed"]) == ("running", 12)
    assert await _runs(runtime, fid) == (12, 12)
    await _run(runtime, body["job"])
    assert await _runs(runtime, fid) == (24, 24)
    done = (await client.get(body["job"], headers=auth(tenant))).json()
    assert done["counters"] == {"started": 24}


async def test_a_small_enrolment_and_listed_contacts_are_entered_at_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    fid = await _setup(client, runtime, tenant, 3)
    body = (await _post(client, tenant, f"/{fid}/enroll", KEEP)).json()
    assert body == {"started": 2, "job": None}


async def test_a_large_segment_entry_takes_the_same_path(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    fid = await _setup(client, runtime, tenant, 10)  # 8 named Keep
    r = await _post(client, tenant, f"/{fid}/segment-entries", {"segment": KEEP["predicate"]})
    assert r.status_code == 200, r.text
    assert r.json()["started"] == 4
    await _run(runtime, r.json()["job"])
    assert await _runs(runtime, fid) == (8, 8)


async def test_the_dashboard_shows_an_enrolment_job_with_its_progress_bar(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    from tests.platform.conftest import sign_in

    fid = await _setup(client, runtime, tenant, 10)  # 8 named Keep
    body = (await _post(client, tenant, f"/{fid}/enroll", KEEP)).json()
    job_id = body["job"].rsplit("/", 1)[1]
    await sign_in(client, tenant.email, tenant.password)
    running = await client.get(f"/ui/jobs/{job_id}")
    assert running.status_code == 200
    assert 'aria-label="Enrolment progress"' in running.text
    assert f'hx-get="/ui/jobs/{job_id}/progress"' in running.text
    assert 'value="0.5"' in running.text  # the first chunk: 4 of 8
    await _run(runtime, body["job"])
    ended = await client.get(f"/ui/jobs/{job_id}/progress")
    assert "hx-trigger" not in ended.text
    assert '<td data-counter="started">8</td>' in ended.text
    assert (await client.get("/ui/jobs/999999")).status_code == 404
