"""The instance's machinery — sweepers, the job queue, dead jobs and their errors — is shared by
every organisation on the instance: its operators (owners and admins of the first organisation,
the one set up with the instance) see it; another organisation's owner sees only their own
workspace's activity on the operations page, and the machinery's partial refuses them."""

from __future__ import annotations

import httpx
import pytest

from app.db.session import Database
from app.runtime import Runtime
from tests.conftest import auth, truncate_all
from tests.factories import Tenant, create_tenant
from tests.platform.conftest import sign_in


@pytest.fixture(autouse=True)
async def no_earlier_organisation(shared_db: Database) -> None:
    """These tests' premise is that their ``tenant`` is the instance's first organisation, which
    is global state: an organisation an earlier test on this worker left behind (one committed
    after that test emptied the tables) would be first instead. Start from empty tables."""
    await truncate_all(shared_db)


async def test_the_first_organisations_owner_sees_the_queue_and_the_sweepers(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    await create_tenant(runtime, name="Globex")
    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/operations")
    assert page.status_code == 200
    assert 'id="status"' in page.text
    partial = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
    assert partial.status_code == 200


async def test_another_organisations_owner_sees_only_their_activity(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    globex = await create_tenant(runtime, name="Globex")
    await sign_in(client, globex.email, globex.password)
    page = await client.get("/ui/operations")
    assert page.status_code == 200
    assert 'id="status"' not in page.text
    assert 'id="activity"' in page.text
    assert "shown to its operators only" in page.text
    partial = await client.get("/ui/partials/status", headers={"HX-Request": "true"})
    assert partial.status_code == 403


# -- the API: /api/v1/queue and /api/v1/sweepers (PL-5) -------------------------------------------

OPERATIONS_API = ["/api/v1/queue", "/api/v1/sweepers"]


@pytest.mark.parametrize("path", OPERATIONS_API)
async def test_pl5_an_operator_signed_in_reads_the_platform_api(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, path: str
) -> None:
    """PL-5: the first organisation's owner, with the dashboard's session, reads the queue and
    the sweepers over the API."""
    await create_tenant(runtime, name="Globex")
    await sign_in(client, tenant.email, tenant.password)
    response = await client.get(path)
    assert response.status_code == 200, response.text
    if path == "/api/v1/queue":
        assert response.json()["backend"] == runtime.queue.backend
    else:
        assert {s["name"] for s in response.json()} == {s.name for s in runtime.sweeps}


@pytest.mark.parametrize("path", OPERATIONS_API)
async def test_pl5_another_organisations_owner_is_refused_the_platform_api(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, path: str
) -> None:
    """PL-5: the owner of an organisation other than the instance's first one hears 403 — the
    queue's dead jobs and errors are every tenant's."""
    globex = await create_tenant(runtime, name="Globex")
    await sign_in(client, globex.email, globex.password)
    response = await client.get(path)
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert "operators" in response.json()["message"]


@pytest.mark.parametrize("path", OPERATIONS_API)
async def test_pl5_a_plain_member_of_the_first_organisation_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, path: str
) -> None:
    await sign_in(client, tenant.member_email, tenant.member_password)
    assert (await client.get(path)).status_code == 403


@pytest.mark.parametrize("path", OPERATIONS_API)
async def test_pl5_the_first_organisations_workspace_key_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, path: str
) -> None:
    """A workspace API key is refused (403) even in the operators' own organisation: a key
    acts for its workspace, never for the instance."""
    response = await client.get(path, headers=auth(tenant))
    assert response.status_code == 403


@pytest.mark.parametrize("path", OPERATIONS_API)
async def test_pl5_without_key_or_session_the_platform_api_answers_401(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


async def test_pl5_a_bad_key_is_not_rescued_by_a_session(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """A request that sends a key is judged by the key, signed in or not."""
    await sign_in(client, tenant.email, tenant.password)
    response = await client.get("/api/v1/queue", headers={"Authorization": "Bearer swl_nope"})
    assert response.status_code == 401
