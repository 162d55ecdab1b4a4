"""Bounded, validated inputs: location codes from the provider's table, language codes in the
provider's spelling, integers that cannot reach the database out of range (422, never 500)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.engines.ranktracking import locations
from app.engines.ranktracking.schedules.rules import PROVIDER_LANGUAGES
from app.runtime import Runtime
from app.sandbox.serp import LANGUAGES, SerpSimulator
from tests.conftest import auth
from tests.factories import Tenant

BASE = "/api/v1/ranktracking"


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Shoes",
        "data_type": "serp",
        "frequency": "weekly",
        "depth": "top10",
        "location_code": 2840,
        "language_code": "en",
        "domain": "acme-shop.com",
        "devices": ["desktop"],
        "keywords": ["red shoes"],
    }
    body.update(overrides)
    return body


@pytest.mark.parametrize("code", [2147483648, 2**63, 12345678901234567890, 9999, 2643, 0, -5])
async def test_out_of_range_and_unknown_location_codes_are_422(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator, code: int
) -> None:
    """2147483648 (one past the 32-bit column), 2^63, a 20-digit code, a code that names no
    location, Russia (2643: the provider serves no location there any more), zero, negative."""
    for path in ("/estimate", "/schedules"):
        answer = await client.post(
            BASE + path, json=_body(location_code=code), headers=auth(tenant)
        )
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["details"][0]["field"] == "location_code"


async def test_edit_refuses_an_unknown_location(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    from tests.engines.ranktracking.factories import fund

    await fund(runtime, tenant, 1000)
    created = await client.post(BASE + "/schedules", json=_body(), headers=auth(tenant))
    schedule_id = created.json()["schedule"]["id"]
    answer = await client.patch(
        f"{BASE}/schedules/{schedule_id}", json={"location_code": 2**40}, headers=auth(tenant)
    )
    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize(
    ("given", "stored"), [("EN", "en"), (" De ", "de"), ("zh-tw", "zh-TW"), ("ZH_CN", "zh-CN")]
)
async def test_language_codes_are_case_insensitive_and_stored_canonical(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, given: str, stored: str
) -> None:
    answer = await client.post(
        BASE + "/schedules", json=_body(language_code=given), headers=auth(tenant)
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["schedule"]["language_code"] == stored


@pytest.mark.parametrize("given", ["pt-BR", "xx", "english", ""])
async def test_language_codes_the_provider_does_not_know_are_422(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, given: str
) -> None:
    answer = await client.post(
        BASE + "/estimate", json=_body(language_code=given), headers=auth(tenant)
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["details"][0]["field"] == "language_code"


async def test_other_integers_are_bounded(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    too_big = 2**64
    answer = await client.post(
        BASE + "/estimate",
        json=_body(keywords=None, list_id=too_big),
        headers=auth(tenant),
    )
    assert answer.status_code in (400, 422), answer.text
    answer = await client.post(
        BASE + "/estimate", json=_body(monthly_cap_eur="1e30"), headers=auth(tenant)
    )
    assert answer.status_code == 422, answer.text
    for path in (f"/schedules/{too_big}", f"/schedules/{2**63}", f"/runs/{2**63}/results"):
        answer = await client.get(BASE + path, headers=auth(tenant))
        assert answer.status_code in (404, 422), (path, answer.text)


async def test_locations_are_searchable_by_name(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient, sim: SerpSimulator
) -> None:
    answer = await client.get(BASE + "/locations", params={"q": "germ"}, headers=auth(tenant))
    assert answer.status_code == 200
    assert answer.json()[0] == {
        "location_code": 2276,
        "location_name": "Germany",
        "country_iso_code": "DE",
        "location_type": "Country",
        "parent_code": None,
    }
    names = [
        r["location_name"]
        for r in (
            await client.get(BASE + "/locations", params={"q": "london"}, headers=auth(tenant))
        ).json()
    ]
    assert "London,England,United Kingdom" in names
    assert (
        await client.get(BASE + "/locations", params={"limit": 0}, headers=auth(tenant))
    ).status_code in (400, 422)


def test_the_location_table_has_every_country_by_the_providers_rule() -> None:
    countries = locations.countries()
    assert len(countries) >= 240
    assert locations.shipped(2840).name == "United States"  # type: ignore[union-attr]
    assert locations.shipped(2276).name == "Germany"  # type: ignore[union-attr]
    assert locations.shipped(2826).name == "United Kingdom"  # type: ignore[union-attr]
    assert locations.shipped(2643) is None  # Russia: not served
    assert len({loc.country_iso for loc in countries}) == len(countries)


def test_every_language_we_accept_is_one_the_provider_accepts() -> None:
    assert PROVIDER_LANGUAGES <= LANGUAGES


async def test_the_wizard_offers_locations_by_name(
    runtime: Runtime, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    from tests.platform.conftest import sign_in

    await sign_in(client, tenant.email, tenant.password)
    page = await client.get("/ui/ranktracking/new")
    assert page.status_code == 200
    assert '<option value="2276">Germany</option>' in page.text
