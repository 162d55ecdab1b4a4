"""Dead jobs in the API and on the dashboard (PL-1, PL-5): a workspace's admins and keys list,
read, retry, requeue and discard its dead jobs; another workspace's people and keys get 404; a
workspace member gets 403; a platform job (no workspace) is the instance operators' only. The
pages render with their history and CSRF-protected buttons."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import httpx
import pytest

from app.runtime import Runtime
from app.scheduling.dead_rows import record_dead_job
from app.scheduling.jobs import JobContext, JobPayload, JobSpec, OwnedBy
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, post_form, sign_in


class Owned(JobPayload, frozen=True):
    workspace_id: int


async def _never_runs(ctx: JobContext, payload: JobPayload) -> None:
    raise AssertionError("the web tests run no worker")


OWNED = JobSpec("test.owned", Owned, _never_runs, max_tries=4, owner=OwnedBy("workspace_id"))
PLATFORM = JobSpec("test.platform", Owned, _never_runs, max_tries=4)


@pytest.fixture(autouse=True)
def _specs(runtime: Runtime) -> None:
    runtime.add_jobs([OWNED, PLATFORM])


async def _dead(runtime: Runtime, job_id: str, spec: JobSpec[Owned], workspace_id: int) -> None:
    """A job that died after three tries (as the arq runner records one)."""
    await record_dead_job(
        runtime.db,
        runtime.clock,
        job_id=job_id,
        name=spec.name,
        payload=spec.encode(Owned(workspace_id=workspace_id)),
        attempts=3,
        error="RuntimeError: the provider said no",
    )


def _url(job_id: str, action: str = "") -> str:
    return f"/api/v1/queue/jobs/{quote(job_id, safe='')}{action}"


async def test_a_workspace_key_lists_and_reads_its_dead_jobs_with_their_history(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """PL-5: the workspace's key sees its dead job, its last error and its attempts."""
    await _dead(runtime, "acme:1:2026-03-02T09:00:00+00:00", OWNED, tenant.workspace_id)
    await _dead(runtime, "globex:1", OWNED, other_tenant.workspace_id)
    await _dead(runtime, "platform:1", PLATFORM, tenant.workspace_id)
    listed = await client.get("/api/v1/queue/jobs", headers=auth(tenant))
    assert listed.status_code == 200, listed.text
    assert [j["id"] for j in listed.json()["items"]] == ["acme:1:2026-03-02T09:00:00+00:00"]
    job = await client.get(_url("acme:1:2026-03-02T09:00:00+00:00"), headers=auth(tenant))
    assert job.status_code == 200
    body = job.json()
    assert body["status"] == "dead"
    assert body["workspace_id"] == tenant.workspace_id
    assert body["last_error"] == "RuntimeError: the provider said no"
    assert [(h["attempt"], h["outcome"]) for h in body["history"]] == [(3, "dead")]
    await _dead(runtime, "acme:later", OWNED, tenant.workspace_id)
    first = (await client.get("/api/v1/queue/jobs?limit=1", headers=auth(tenant))).json()
    assert first["next_cursor"] == "1"
    second = await client.get(
        f"/api/v1/queue/jobs?limit=1&cursor={first['next_cursor']}", headers=auth(tenant)
    )
    assert second.json()["next_cursor"] is None
    both = [first["items"][0]["id"], second.json()["items"][0]["id"]]
    assert sorted(both) == ["acme:1:2026-03-02T09:00:00+00:00", "acme:later"]


async def test_another_workspaces_job_is_not_found_and_cannot_be_changed(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """PL-1: a job of workspace A answers 404 to workspace B's key and people, for reads and
    for every operation, and is left as it was."""
    await _dead(runtime, "acme:2", OWNED, tenant.workspace_id)
    headers = auth(other_tenant)
    assert (await client.get(_url("acme:2"), headers=headers)).status_code == 404
    for action in ("/retry", "/discard"):
        assert (await client.post(_url("acme:2", action), headers=headers)).status_code == 404
    requeue = await client.post(_url("acme:2", "/requeue"), headers=headers, json={})
    assert requeue.status_code == 404
    assert (await client.get("/api/v1/queue/jobs", headers=headers)).json()["items"] == []
    await sign_in(client, other_tenant.email, other_tenant.password)
    assert (await client.get("/ui/queue/jobs/acme%3A2")).status_code == 404
    mine = await client.get(_url("acme:2"), headers=auth(tenant))
    assert mine.json()["status"] == "dead"


async def test_a_platform_job_is_the_operators_only(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    """PL-5: a job of no workspace is not found with a workspace key (even the first
    organisation's); the instance's operator sees it and its page."""
    await _dead(runtime, "platform:2", PLATFORM, tenant.workspace_id)
    assert (await client.get(_url("platform:2"), headers=auth(tenant))).status_code == 404
    await sign_in(client, other_tenant.email, other_tenant.password)
    assert (await client.get("/ui/queue/jobs/platform%3A2")).status_code == 404
    client.cookies.clear()
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/queue/jobs/platform%3A2")
    assert page.status_code == 200
    assert "a platform job" in page.text


async def test_a_workspace_member_is_refused(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """PL-5: the queue's jobs are for the workspace's admins, not its members."""
    await _dead(runtime, "acme:3", OWNED, tenant.workspace_id)
    await sign_in(client, tenant.member_email, tenant.member_password)
    assert (await client.get("/ui/queue/jobs/acme%3A3")).status_code == 403


async def test_retry_requeue_and_discard_through_the_api(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """PL-5: retry puts the job back now with its tries counted afresh under the same id;
    a second retry answers 409; requeue takes a time from now on (a past one is 422);
    discard keeps the job, discarded, with who did it in its history."""
    headers = auth(tenant)
    await _dead(runtime, "acme:retry", OWNED, tenant.workspace_id)
    retried = await client.post(_url("acme:retry", "/retry"), headers=headers)
    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert (body["id"], body["status"], body["attempts"]) == ("acme:retry", "queued", 0)
    assert body["history"][-1]["outcome"] == "retried"
    assert body["history"][-1]["worker"].startswith("api_key:")
    again = await client.post(_url("acme:retry", "/retry"), headers=headers)
    assert again.status_code == 409
    assert again.json()["code"] == "job_not_dead"

    await _dead(runtime, "acme:later", OWNED, tenant.workspace_id)
    past = runtime.clock.now() - timedelta(days=1)
    refused = await client.post(
        _url("acme:later", "/requeue"), headers=headers, json={"run_at": past.isoformat()}
    )
    assert refused.status_code == 422
    at = runtime.clock.now() + timedelta(hours=2)
    requeued = await client.post(
        _url("acme:later", "/requeue"), headers=headers, json={"run_at": at.isoformat()}
    )
    assert requeued.status_code == 200
    assert requeued.json()["status"] == "queued"
    assert requeued.json()["run_at"] == at.isoformat().replace("+00:00", "Z")

    await _dead(runtime, "acme:gone", OWNED, tenant.workspace_id)
    gone = await client.post(_url("acme:gone", "/discard"), headers=headers)
    assert gone.status_code == 200
    assert gone.json()["status"] == "discarded"
    discarded = await client.get("/api/v1/queue/jobs?status=discarded", headers=headers)
    assert [j["id"] for j in discarded.json()["items"]] == ["acme:gone"]
    assert (await client.get("/api/v1/queue/jobs", headers=headers)).json()["items"] == []


async def test_the_dashboard_pages_show_a_dead_job_and_retry_it(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """PL-5: the list and the job's page render for the workspace's admin, with the history and
    forms carrying the CSRF token; the retry button revives the job; without the token the form
    is refused."""
    await _dead(runtime, "acme:ui", OWNED, tenant.workspace_id)
    await sign_in(client, tenant.email, tenant.password)
    listing = await client.get("/ui/queue/jobs")
    assert listing.status_code == 200
    assert "/ui/queue/jobs/acme%3Aui" in listing.text
    page = await client.get("/ui/queue/jobs/acme%3Aui")
    assert page.status_code == 200
    assert 'id="job-history"' in page.text
    assert page.text.count('name="_csrf_token"') >= 3
    forged = await client.post("/ui/queue/jobs/acme%3Aui/discard")
    assert forged.status_code == 403
    done = await post_form(client, "/ui/queue/jobs/acme%3Aui", "/ui/queue/jobs/acme%3Aui/retry")
    assert done.status_code in (302, 303)
    after = await client.get("/ui/queue/jobs/acme%3Aui")
    assert 'id="job-status">queued' in after.text
    assert 'data-outcome="retried"' in after.text
    assert 'id="job-actions"' not in after.text
    assert csrf_from(after.text)


async def test_the_dashboard_requeues_at_a_time_and_discards(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """PL-5: the requeue form takes a UTC time (an unreadable one is shown again with the
    reason, 422, nothing changed); discard keeps the job, discarded."""
    await _dead(runtime, "acme:form", OWNED, tenant.workspace_id)
    await sign_in(client, tenant.email, tenant.password)
    page = "/ui/queue/jobs/acme%3Aform"
    bad = await post_form(client, page, f"{page}/requeue", run_at="next tuesday")
    assert bad.status_code == 422
    assert "Run at:" in bad.text
    assert 'id="job-status">dead' in bad.text
    at = runtime.clock.now() + timedelta(days=1)
    moved = await post_form(client, page, f"{page}/requeue", run_at=at.strftime("%Y-%m-%dT%H:%M"))
    assert moved.status_code in (302, 303)
    job = (await client.get(_url("acme:form"), headers=auth(tenant))).json()
    assert (job["status"], job["history"][-1]["outcome"]) == ("queued", "requeued")
    await _dead(runtime, "acme:bin", OWNED, tenant.workspace_id)
    binned = await post_form(
        client, "/ui/queue/jobs/acme%3Abin", "/ui/queue/jobs/acme%3Abin/discard"
    )
    assert binned.status_code in (302, 303)
    listing = await client.get("/ui/queue/jobs?status=discarded")
    assert "acme:bin" in listing.text
