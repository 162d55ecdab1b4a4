"""Keyword import as a background job (issue 11, bulk work off the request): checked on
submission (404/422, nothing written), applied in bounded chunks with a per-entry report and
progress under /api/v1/jobs, the same keywords in the list as the direct import would add."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx

from app.engines.ranktracking.keyword_import import KEYWORDS_IMPORT, KEYWORDS_IMPORT_JOB
from app.engines.ranktracking.lists import MAX_LIST_KEYWORDS
from app.runtime import Runtime
from app.scheduling.bulk import run_bulk_job
from app.settings import BulkSettings
from tests.conftest import auth
from tests.engines.ranktracking.factories import make_list
from tests.factories import Tenant

API = "/api/v1/ranktracking"


async def _run(runtime: Runtime, job_id: int) -> None:
    """Run the queued bulk job to its end in this task (what a worker does)."""
    await run_bulk_job(
        runtime.context(job_id=f"bulk:{job_id}:0"), KEYWORDS_IMPORT, job_id, KEYWORDS_IMPORT_JOB
    )


async def _submit(
    client: httpx.AsyncClient, tenant: Tenant, list_id: int, body: dict[str, Any]
) -> httpx.Response:
    return await client.post(f"{API}/lists/{list_id}/import-jobs", json=body, headers=auth(tenant))


async def _keywords(client: httpx.AsyncClient, tenant: Tenant, list_id: int) -> list[str]:
    r = await client.get(f"{API}/lists/{list_id}", headers=auth(tenant))
    assert r.status_code == 200, r.text
    return sorted(k if isinstance(k, str) else k["keyword"] for k in r.json()["keywords"])


async def test_a_csv_import_runs_in_chunks_with_a_per_entry_report(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    runtime.settings = dataclasses.replace(
        runtime.settings, bulk=BulkSettings(chunk_items=3, max_import_rows=50)
    )
    kl = await make_list(runtime, tenant, ["red shoes"])
    csv_text = (
        "keyword\n"
        "Blue  Shoes\n"
        "red shoes\n"  # already in the list
        f"{'x' * 201}\n"  # too long
        "green shoes\n"
        "BLUE SHOES\n"  # a repeat once normalised, in the next chunk
        "boots\n"
    )
    r = await _submit(client, tenant, kl.id, {"text": csv_text, "format": "csv"})
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["status"], job["total"], job["processed"]) == ("queued", 6, 0)
    assert await _keywords(client, tenant, kl.id) == ["red shoes"], "nothing before the job runs"
    assert (await client.get(job["url"], headers=auth(other_tenant))).status_code == 404

    await _run(runtime, job["id"])

    done = (await client.get(job["url"], headers=auth(tenant))).json()
    assert done["status"] == "done"
    assert (done["processed"], done["progress"]) == (6, 1.0)
    assert done["counters"] == {"added": 3, "skipped": 2, "failed": 1}
    assert [(e["item"], e["field"]) for e in done["errors"]] == [(3, "keyword")]
    assert await _keywords(client, tenant, kl.id) == [
        "blue shoes",
        "boots",
        "green shoes",
        "red shoes",
    ]


async def test_the_import_is_checked_before_anything_is_written(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    kl = await make_list(runtime, tenant, ["a"])
    empty = await _submit(client, tenant, kl.id, {"text": "\n\n", "format": "text"})
    assert empty.status_code == 422, empty.text
    too_many = "\n".join(f"kw {i}" for i in range(MAX_LIST_KEYWORDS + 1))
    big = await _submit(client, tenant, kl.id, {"text": too_many, "format": "text"})
    assert big.status_code == 422, big.text
    assert (await _submit(client, other_tenant, kl.id, {"text": "b"})).status_code == 404
    jobs = (await client.get("/api/v1/jobs", headers=auth(tenant))).json()["items"]
    assert jobs == []
    assert await _keywords(client, tenant, kl.id) == ["a"]
