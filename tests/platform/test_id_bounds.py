"""PL-10: an integer in a path or query outside the range of the column it is looked up in answers
404 (path) or 422 ``out_of_range`` naming the parameter (query) — after authentication, never a
500 — on SQLite and PostgreSQL alike; an application whose integer path parameter no column
bounds refuses to start."""

from __future__ import annotations

import httpx
import pytest
from litestar import Litestar, get
from litestar.exceptions import ImproperlyConfiguredException
from litestar.params import FromPath

from app.web.access import Auth, authenticated, require_caller
from app.web.id_bounds import PARAMETER_COLUMNS, column_range, verify_id_bounds
from tests.conftest import auth
from tests.factories import Tenant

INT32 = 2**31
INT64 = 2**63


def test_ranges_come_from_the_column_types() -> None:
    """PL-10: a version number is a 32-bit column, the ids are 64-bit."""
    assert column_range(PARAMETER_COLUMNS["number"]) == (1, INT32 - 1)
    assert column_range(PARAMETER_COLUMNS["funnel_id"]) == (1, INT64 - 1)
    assert column_range(PARAMETER_COLUMNS["workspace_id"]) == (1, INT64 - 1)


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/funnels/1/versions/{INT32}",
        f"/api/v1/funnels/1/versions/{INT32 - 1}",
        f"/api/v1/funnels/{INT64}/versions/1",
        f"/api/v1/api-keys/{INT64}",
        f"/api/v1/api-keys/{INT64 - 1}",
        f"/api/v1/api-keys/{2**64}",
        "/api/v1/api-keys/99999999999999999999999999999999",
        "/api/v1/adrules/rules/-1",
        "/api/v1/adrules/rules/0",
        f"/api/v1/ranktracking/runs/{INT64}/results",
        f"/api/v1/funnels/campaigns/-{2**64}",
    ],
)
async def test_a_path_id_out_of_its_columns_range_is_404(
    client: httpx.AsyncClient, tenant: Tenant, path: str
) -> None:
    """PL-10: 2³¹ as a version number (a 500 on PostgreSQL before), 2⁶³ and beyond as an id,
    0 and negative ids: no such object."""
    response = await client.get(path, headers=auth(tenant))
    assert response.status_code == 404, response.text
    assert response.json()["code"].endswith("not_found")


async def test_an_alert_rule_id_out_of_range_is_404(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """PL-10: ``rule_id`` under ranktracking is an alert rule's id (another table, same range)."""
    for rule_id in (INT64, 0):
        response = await client.delete(
            f"/api/v1/ranktracking/schedules/1/alerts/{rule_id}", headers=auth(tenant)
        )
        assert response.status_code == 404, response.text


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/funnels/1/versions/{INT32}",
        f"/api/v1/api-keys/{INT64}",
        f"/api/v1/api-keys/{2**64}",
        "/api/v1/adrules/rules/-1",
        f"/api/v1/adrules/batches?rule_id={INT64}",
    ],
)
async def test_an_anonymous_caller_hears_401_whatever_the_id(
    client: httpx.AsyncClient, path: str
) -> None:
    """PL-10 after authentication: the bounds are checked once the caller is known."""
    response = await client.get(path)
    assert response.status_code == 401, response.text


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"/api/v1/adrules/batches?rule_id={INT64}", "rule_id"),
        ("/api/v1/adrules/batches?rule_id=-1", "rule_id"),
        (f"/api/v1/funnels/events?contact_id={2**64}", "contact_id"),
        ("/api/v1/funnels/events?contact_id=0", "contact_id"),
        (f"/api/v1/ranktracking/activity?schedule_id={INT64}", "schedule_id"),
    ],
)
async def test_a_query_id_out_of_its_columns_range_is_422_naming_it(
    client: httpx.AsyncClient, tenant: Tenant, path: str, name: str
) -> None:
    """PL-10: 422 ``out_of_range`` with the parameter named in ``details``."""
    response = await client.get(path, headers=auth(tenant))
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "out_of_range"
    assert [d["field"] for d in body["details"]] == [name]


async def test_query_ids_in_range_are_looked_up(client: httpx.AsyncClient, tenant: Tenant) -> None:
    """PL-10: the largest id a column holds is an ordinary answer on both databases."""
    rule = await client.get(f"/api/v1/adrules/batches?rule_id={INT64 - 1}", headers=auth(tenant))
    assert (rule.status_code, rule.json()["code"]) == (404, "rule_not_found"), rule.text
    events = await client.get(
        f"/api/v1/funnels/events?contact_id={INT64 - 1}", headers=auth(tenant)
    )
    assert events.status_code == 200, events.text


@pytest.mark.parametrize("workspace", [str(INT64), str(2**64), "-1", "0"])
async def test_a_public_webhook_with_a_workspace_id_out_of_range_is_404(
    client: httpx.AsyncClient, workspace: str
) -> None:
    """PL-10 on the public receivers, which have no caller to authenticate."""
    response = await client.post(
        f"/hooks/funnels/{workspace}/payments",
        content=b'{"id": "evt_1"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 404, response.text


def test_an_integer_path_parameter_without_a_column_refuses_to_start() -> None:
    """PL-10: a new route cannot forget its bound."""

    @get("/things/{mystery_id:int}", opt=authenticated(Auth.API_KEY), guards=[require_caller])
    async def thing(mystery_id: FromPath[int]) -> None:
        return None

    with pytest.raises(ImproperlyConfiguredException, match="mystery_id"):
        verify_id_bounds(Litestar(route_handlers=[thing]))


def test_an_unguarded_integer_path_parameter_refuses_to_start() -> None:
    """PL-10: a public route with an id checks it with its own guard."""

    @get("/things/{funnel_id:int}", opt={"public": "a test"})
    async def thing(funnel_id: FromPath[int]) -> None:
        return None

    with pytest.raises(ImproperlyConfiguredException, match="no guard checks"):
        verify_id_bounds(Litestar(route_handlers=[thing]))
