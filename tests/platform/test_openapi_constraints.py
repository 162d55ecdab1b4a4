"""The OpenAPI document states what the API enforces (PL-10, PL-11; issue 31, items 4 and 5): a
reader that sends what the document allows is not refused for a rule the document did not say,
and what it forbids is refused. List items carry their bounds, integer ids their column's range,
every free text the NUL rule, the template key its enum, query values the validators check their
pattern or enum, and fields checked in code the rule a ``Meta(extra_json_schema=…)`` states."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from litestar._openapi.plugin import OpenAPIPlugin

from app.engines.adrules.templates import TEMPLATES
from app.settings import Settings
from app.web.app import create_app
from app.web.openapi_constraints import NO_NUL
from app.web.openapi_parameters import _WithParameterRules
from tests.conftest import auth
from tests.factories import Tenant

ID_MAX = 2**63 - 1


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    answer = await client.get("/schema/openapi.json")
    assert answer.status_code == 200
    return dict(answer.json())


def _parameter(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    for parameter in document["paths"][path][method]["parameters"]:
        if parameter["name"] == name:
            return dict(parameter["schema"])
    raise AssertionError(f"{method} {path} has no parameter {name}")


def _branch(schema: dict[str, Any], kind: str) -> dict[str, Any]:
    if schema.get("type") == kind:
        return schema
    return next(s for s in schema["oneOf"] if s.get("type") == kind)


def test_the_plugin_the_document_is_finished_by_is_litestars_with_its_build_method(
    settings: Settings,
) -> None:
    """PL-11: :mod:`app.web.openapi_parameters` extends a private method of Litestar's plugin;
    this fails when Litestar moves it, rather than the rules silently leaving the document."""
    assert callable(OpenAPIPlugin.__dict__["_build_openapi"])
    app = create_app(settings, background=False)
    assert type(app.plugins.get(OpenAPIPlugin)) is _WithParameterRules


async def test_pl10_list_items_and_ids_carry_their_ranges(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for name in ("FromTemplateIn", "RuleIn"):
        items = schemas[name]["properties"]["account_ids"]["items"]
        assert (items["minimum"], items["maximum"]) == (1, ID_MAX), name
    funnel = _parameter(document, "/api/v1/funnels/{funnel_id}", "get", "funnel_id")
    assert (funnel["minimum"], funnel["maximum"]) == (1, ID_MAX)
    version = _parameter(document, "/api/v1/funnels/{funnel_id}/versions/{number}", "get", "number")
    assert (version["minimum"], version["maximum"]) == (1, 2**31 - 1)
    schedule = _branch(
        _parameter(document, "/api/v1/ranktracking/activity", "get", "schedule_id"), "integer"
    )
    assert (schedule["minimum"], schedule["maximum"]) == (1, ID_MAX)


async def test_pl11_the_template_key_is_an_enum_and_any_other_key_is_404(
    document: dict[str, Any], client: httpx.AsyncClient, tenant: Tenant
) -> None:
    path = "/api/v1/adrules/templates/{key}/rules"
    assert _parameter(document, path, "post", "key")["enum"] == list(TEMPLATES)
    r = await client.post(
        "/api/v1/adrules/templates/no_such_template/rules", json={}, headers=auth(tenant)
    )
    assert r.status_code == 404


async def test_pl11_free_text_states_the_nul_rule_and_the_api_refuses_nul(
    document: dict[str, Any], client: httpx.AsyncClient, tenant: Tenant
) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["KeywordsIn"]["properties"]["keywords"]["items"]["pattern"] == NO_NUL
    assert _branch(schemas["FromTemplateIn"]["properties"]["name"], "string")["pattern"] == NO_NUL
    funnels = _parameter(document, "/api/v1/funnels/contacts", "get", "q")
    assert _branch(funnels, "string")["pattern"] == NO_NUL
    assert re.fullmatch(NO_NUL, "any text, ünïcode too")
    assert not re.fullmatch(NO_NUL, "a\x00b")
    r = await client.post("/api/v1/funnels/tags", json={"name": "a\u0000b"}, headers=auth(tenant))
    assert r.status_code == 422


@pytest.mark.parametrize(
    ("path", "name", "good", "bad"),
    [
        ("/api/v1/api-keys", "cursor", "123", "abc"),
        ("/api/v1/audit", "from", "2026-01-05T10:00:00+01:00", "yesterday"),
        ("/api/v1/audit", "to", "2026-01-05", "2026-01-05T10:00"),
        ("/api/v1/audit", "actor", "api_key:7", "robot:1"),
    ],
)
async def test_pl11_query_values_state_the_pattern_they_are_checked_with(
    document: dict[str, Any],
    client: httpx.AsyncClient,
    tenant: Tenant,
    path: str,
    name: str,
    good: str,
    bad: str,
) -> None:
    schema = _parameter(document, path, "get", name)
    pattern = schema.get("pattern") or _branch(schema, "string")["pattern"]
    assert re.search(pattern, good)
    assert not re.search(pattern, bad)
    assert (await client.get(path, params={name: good}, headers=auth(tenant))).status_code == 200
    refused = await client.get(path, params={name: bad}, headers=auth(tenant))
    assert refused.status_code == 422
    assert refused.json()["details"][0]["field"] == name


async def test_pl11_query_enums_are_the_values_the_api_takes(
    document: dict[str, Any], client: httpx.AsyncClient, tenant: Tenant
) -> None:
    records = "/api/v1/adrules/batches/{batch_record_id}/records"
    statuses = _parameter(document, records, "get", "status")["enum"]
    assert "executed" in statuses
    assert "pending" not in statuses
    recipients = "/api/v1/funnels/campaigns/{campaign_id}/recipients"
    assert _parameter(document, recipients, "get", "status")["enum"] == [
        "pending",
        "sent",
        "skipped",
        "failed",
    ]
    positions = "/api/v1/ranktracking/schedules/{schedule_id}/positions"
    assert "volume" in _parameter(document, positions, "get", "sort")["enum"]
    moved = _parameter(document, positions, "get", "moved")
    assert (moved["minimum"], moved["maximum"]) == (1, 100)
    secret = _parameter(document, "/api/v1/secrets/{name}", "put", "name")["pattern"]
    for name, fits in (("smtp.password", True), ("-lead", False), ("a" * 101, False)):
        assert bool(re.search(secret, name)) is fits
        r = await client.put(
            f"/api/v1/secrets/{name}", json={"value": "x" * 8}, headers=auth(tenant)
        )
        assert (r.status_code == 200) is fits, (name, r.text)


async def test_pl11_rules_checked_in_code_are_stated_on_their_fields(
    document: dict[str, Any], client: httpx.AsyncClient, tenant: Tenant
) -> None:
    schemas = document["components"]["schemas"]
    blank = schemas["CampaignIn"]["properties"]["name"]["pattern"]
    assert re.search(blank, "March news")
    assert not re.search(blank, "   ")
    assert schemas["NameIn"]["properties"]["name"]["maxLength"] == 100
    horizon = schemas["SimulateIn"]["properties"]["horizon_days"]
    assert (horizon["minimum"], horizon["maximum"]) == (1, 3660)
    email = _branch(schemas["ContactIn"]["properties"]["email"], "string")
    assert email["format"] == "email"
    r = await client.post(
        "/api/v1/funnels/campaigns",
        json={"name": "   ", "subject": "News", "body": "Hello"},
        headers=auth(tenant),
    )
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "name"
