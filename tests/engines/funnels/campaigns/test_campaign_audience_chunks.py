"""FN-28 with a large audience: the snapshot is taken in bounded chunks (issue 11 item 4). The
first chunk comes with the claim, the rest as a bulk job with its progress in the job status API
and on the campaign's page; the send starts only once the snapshot is complete; contacts who join
meanwhile are not added; a chunk that fails, or a process SIGKILLed in the middle of one, resumes
after the last committed chunk with every recipient numbered once."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, insert, select

from app.engines.funnels.campaigns.due.audience import AUDIENCE, AUDIENCE_JOB, audience_step
from app.engines.funnels.campaigns.jobs import start_due
from app.engines.funnels.campaigns.models import Campaign, Recipient
from app.engines.funnels.models import Contact
from app.runtime import Runtime
from app.scheduling.bulk import BulkKind, Chunk, StepInput, run_bulk_job
from app.scheduling.bulk_models import BulkJob
from app.settings import BulkSettings
from tests.conftest import auth
from tests.engines.funnels.factories import contact, setup_names
from tests.factories import Tenant

ROOT = Path(__file__).resolve().parents[4]
API = "/api/v1/funnels/campaigns"


def _chunks_of(runtime: Runtime, items: int) -> None:
    runtime.settings = dataclasses.replace(runtime.settings, bulk=BulkSettings(chunk_items=items))


async def _contacts(runtime: Runtime, ws: int, n: int, prefix: str = "r") -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await uow.session.execute(
            insert(Contact),
            [
                {
                    "workspace_id": ws,
                    "email": f"{prefix}{i:04d}@example.com",
                    "first_name": "",
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


async def _campaign(client: httpx.AsyncClient, tenant: Tenant, **kw: Any) -> dict[str, Any]:
    body = {"name": "Big", "subject": "Hi", "body": "News", **kw}
    r = await client.post(API, json=body, headers=auth(tenant))
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _run(runtime: Runtime, job_id: int, kind: BulkKind = AUDIENCE) -> None:
    await run_bulk_job(runtime.context(job_id=f"bulk:{job_id}:0"), kind, job_id, AUDIENCE_JOB)


def _job_id(campaign: dict[str, Any]) -> int:
    return int(str(campaign["audience_job"]).rsplit("/", 1)[1])


async def _recipients(runtime: Runtime, campaign_id: int) -> list[tuple[int, int]]:
    async with runtime.db.read() as s:
        rows = await s.execute(
            select(Recipient.seq, Recipient.contact_id)
            .where(Recipient.campaign_id == campaign_id)
            .order_by(Recipient.seq)
        )
        return [(int(a), int(b)) for a, b in rows.all()]


async def _eligible_ids(runtime: Runtime, ws: int, prefix: str) -> list[int]:
    async with runtime.db.read() as s:
        return list(
            await s.scalars(
                select(Contact.id)
                .where(Contact.workspace_id == ws, Contact.email.like(f"{prefix}%"))
                .order_by(Contact.id)
            )
        )


def _numbered_once(rows: list[tuple[int, int]], contact_ids: list[int]) -> None:
    assert [seq for seq, _ in rows] == list(range(1, len(contact_ids) + 1))
    assert [cid for _, cid in rows] == contact_ids


async def test_fn28_a_large_audience_is_snapshotted_in_chunks_before_the_send(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    ws = tenant.workspace_id
    _chunks_of(runtime, 4)
    await setup_names(runtime, ws, tags=["news"])
    for i in range(10):
        await contact(runtime, ws, f"n{i:02d}@example.com", tags=["news"])
    await contact(runtime, ws, "quiet@example.com")
    c = await _campaign(client, tenant, audience={"kind": "has_tag", "tag": "news"})
    started = await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))
    assert started.status_code == 200, started.text
    body = started.json()
    assert (body["status"], body["audience_size"]) == ("materialising", 4)
    job_url = body["audience_job"]
    job = (await client.get(job_url, headers=auth(tenant))).json()
    assert (job["kind"], job["status"], job["processed"], job["total"]) == (
        "funnels.campaign_audience",
        "queued",
        4,
        10,
    )
    assert (await client.get(job_url, headers=auth(other_tenant))).status_code == 404
    # No sender while the snapshot is incomplete.
    assert c["id"] not in await start_due(runtime.context(), runtime.clock.now())
    # A contact who joins now is not added, though the audience's predicate matches it.
    await contact(runtime, ws, "late@example.com", tags=["news"])
    await _run(runtime, _job_id(body))
    done = (await client.get(job_url, headers=auth(tenant))).json()
    assert (done["status"], done["processed"], done["progress"]) == ("done", 10, 1.0)
    assert done["counters"] == {"recipients": 6}
    after = (await client.get(f"{API}/{c['id']}", headers=auth(tenant))).json()
    assert (after["status"], after["audience_size"]) == ("sending", 10)
    assert c["id"] in await start_due(runtime.context(), runtime.clock.now())
    _numbered_once(await _recipients(runtime, c["id"]), await _eligible_ids(runtime, ws, "n"))


async def test_fn28_an_audience_of_one_chunk_starts_sending_at_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _chunks_of(runtime, 50)
    await _contacts(runtime, tenant.workspace_id, 5)
    c = await _campaign(client, tenant)
    body = (await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))).json()
    assert (body["status"], body["audience_size"], body["audience_job"]) == ("sending", 5, None)


async def test_the_sweep_starts_the_snapshot_job_of_a_due_campaign(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _chunks_of(runtime, 3)
    await _contacts(runtime, tenant.workspace_id, 7)
    c = await _campaign(client, tenant)
    scheduled = await client.post(f"{API}/{c['id']}/schedule", json={}, headers=auth(tenant))
    assert scheduled.status_code == 200, scheduled.text
    assert await start_due(runtime.context(), runtime.clock.now()) == []
    async with runtime.db.read() as s:
        row = await s.get(Campaign, c["id"])
        assert row is not None
        assert (row.status, row.audience_size) == ("materialising", 3)
        job_id = row.audience_job_id
    assert job_id is not None
    await _run(runtime, job_id)
    assert await start_due(runtime.context(), runtime.clock.now()) == [c["id"]]
    _numbered_once(
        await _recipients(runtime, c["id"]), await _eligible_ids(runtime, tenant.workspace_id, "r")
    )


async def test_a_failed_chunk_resumes_after_the_last_committed_one(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _chunks_of(runtime, 3)
    await _contacts(runtime, tenant.workspace_id, 14)
    c = await _campaign(client, tenant)
    body = (await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))).json()
    calls = 0

    async def crashing(session: Any, step: StepInput) -> Chunk:
        nonlocal calls
        calls += 1
        chunk = await audience_step(session, step)
        if calls == 3:
            raise RuntimeError("killed mid-chunk")
        return chunk

    with pytest.raises(RuntimeError):
        await _run(runtime, _job_id(body), BulkKind(AUDIENCE.name, crashing))
    half = (await client.get(body["audience_job"], headers=auth(tenant))).json()
    assert (half["status"], half["processed"]) == ("running", 9)  # the claim's chunk and two
    assert len(await _recipients(runtime, c["id"])) == 9
    await _run(runtime, _job_id(body))
    _numbered_once(
        await _recipients(runtime, c["id"]), await _eligible_ids(runtime, tenant.workspace_id, "r")
    )


async def test_a_campaign_cancelled_while_its_audience_is_taken_stops_the_job(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    _chunks_of(runtime, 2)
    await _contacts(runtime, tenant.workspace_id, 9)
    c = await _campaign(client, tenant)
    body = (await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))).json()
    cancelled = await client.post(f"{API}/{c['id']}/cancel", headers=auth(tenant))
    assert cancelled.json()["status"] == "cancelled"
    await _run(runtime, _job_id(body))
    assert len(await _recipients(runtime, c["id"])) == 2
    after = (await client.get(f"{API}/{c['id']}", headers=auth(tenant))).json()
    assert after["status"] == "cancelled"


async def test_the_campaign_page_shows_the_snapshot_progress_bar(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    from tests.platform.conftest import sign_in

    _chunks_of(runtime, 2)
    await _contacts(runtime, tenant.workspace_id, 5)
    c = await _campaign(client, tenant)
    body = (await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))).json()
    await sign_in(client, tenant.email, tenant.password)
    running = await client.get(f"/ui/funnels/campaigns/{c['id']}/progress")
    assert running.status_code == 200
    assert 'id="audience-bulk-progress"' in running.text
    assert 'aria-label="Audience snapshot progress"' in running.text
    assert 'value="0.4"' in running.text  # 2 of 5
    assert "hx-trigger" in running.text  # the campaign's progress polls while materialising
    await _run(runtime, _job_id(body))
    ended = await client.get(f"/ui/funnels/campaigns/{c['id']}/progress")
    assert 'value="1.0"' in ended.text
    assert '<td data-counter="recipients">3</td>' in ended.text


async def test_fn28_a_snapshot_job_sigkilled_mid_chunk_resumes_each_recipient_once(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, database_url: str
) -> None:
    """The job's process is SIGKILLed while its third chunk's recipients are being written: that
    chunk vanishes with the process, the two before it stay, and the queue's retry (here, in this
    process) takes the snapshot from there — every eligible contact once, numbered 1…n."""
    _chunks_of(runtime, 25)
    ws = tenant.workspace_id
    await _contacts(runtime, ws, 240)
    c = await _campaign(client, tenant)
    body = (await client.post(f"{API}/{c['id']}/audience", headers=auth(tenant))).json()
    assert body["status"] == "materialising"
    job_id = _job_id(body)
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests/engines/funnels/campaigns/audience_proc.py"),
            database_url,
            str(job_id),
            "25",
            "3",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert proc.returncode == -9
    half = (await client.get(body["audience_job"], headers=auth(tenant))).json()
    assert half["status"] == "running"
    # The claim's chunk and the two the process committed (chunks adapt their size to how long
    # the last one held the database, so count them rather than their rows).
    committed = await _recipients(runtime, c["id"])
    assert half["processed"] == len(committed)
    assert 25 < len(committed) < 240
    _numbered_once(committed, (await _eligible_ids(runtime, ws, "r"))[: len(committed)])
    async with runtime.db.read() as s:
        row = await s.get(Campaign, c["id"])
        assert row is not None
        assert row.status == "materialising"
        job = await s.get(BulkJob, job_id)
        assert job is not None
        assert job.chunks == 2
    await _run(runtime, job_id)
    _numbered_once(await _recipients(runtime, c["id"]), await _eligible_ids(runtime, ws, "r"))
    async with runtime.db.read() as s:
        total = await s.scalar(
            select(func.count()).select_from(Recipient).where(Recipient.campaign_id == c["id"])
        )
    assert total == 240
    done = (await client.get(body["audience_job"], headers=auth(tenant))).json()
    assert (done["status"], done["processed"]) == ("done", 240)
