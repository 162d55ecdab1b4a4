"""Every field of the rank-tracking schedule wizard, given a bad value, is refused with a message
that names the field's label and says what it allows, never a machine path or a library's wording
(platform spec PL-16, the schedule wizard of RT-18)."""

from __future__ import annotations

import re

import httpx
import pytest

from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

GOOD: dict[str, str] = {
    "name": "Shoes",
    "data_type": "serp",
    "frequency": "weekly",
    "source": "selection",
    "keywords": "red shoes",
    "depth": "top10",
    "location_code": "2840",
    "language_code": "en",
    "domain": "acme-shop.com",
    "device_desktop": "on",
}
KEYWORD_DATA = {
    **GOOD,
    "data_type": "keyword_data",
    "frequency": "monthly",
    "source": "list",
    "list_id": "{list}",
    "package_volume": "on",
}
FORBIDDEN = ("[", ".config.", "Expected `", "msgspec", "$.", "_")
# The wizard input each form field's error is shown next to.
INPUT = {"device_desktop": "devices", "package_volume": "packages"}

# (the form's other values, the field, its bad value, the label the wizard shows for it)
CASES: list[tuple[dict[str, str], str, str, str]] = [
    (GOOD, "name", "x" * 201, "Name"),
    (GOOD, "data_type", "weather", "Data type"),
    (GOOD, "frequency", "hourly", "Frequency"),
    (GOOD, "source", "both", "Keywords from"),
    ({**GOOD, "source": "list"}, "list_id", "abc", "Keyword list"),
    ({**GOOD, "source": "list"}, "list_id", "", "Keyword list"),
    (GOOD, "keywords", "", "Keywords"),
    (GOOD, "keywords", "\n".join(f"kw {i}" for i in range(201)), "Keywords"),
    (GOOD, "depth", "top5", "Depth"),
    (GOOD, "location_code", "Atlantis", "Location"),
    (GOOD, "language_code", "klingon", "Language"),
    (GOOD, "domain", "not a domain", "Site"),
    (GOOD, "device_desktop", "", "Devices"),
    (KEYWORD_DATA, "package_volume", "", "Keyword data packages"),
    (GOOD, "monthly_cap_eur", "lots", "Monthly cap in EUR"),
    (GOOD, "monthly_cap_eur", "1", "Monthly cap in EUR"),
]


def _errors(html: str) -> list[str]:
    box = re.search(r'id="rt-errors">(.*?)</div>', html, re.DOTALL)
    found = re.findall(r"<p>(.*?)</p>", box.group(1), re.DOTALL) if box else []
    return [re.sub(r"\s+", " ", e).strip() for e in found]


@pytest.mark.parametrize(("base", "field", "value", "label"), CASES)
async def test_every_wizard_field_says_its_label_and_what_it_allows_pl16(
    runtime: Runtime,
    tenant: Tenant,
    client: httpx.AsyncClient,
    base: dict[str, str],
    field: str,
    value: str,
    label: str,
) -> None:
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get("/ui/ranktracking/new")).text)
    if base.get("list_id") == "{list}":
        made = await client.post(
            "/ui/ranktracking/lists",
            data={"name": "Shoes", "keywords": "red shoes", "_csrf_token": token},
        )
        assert made.status_code in (302, 303), made.text[:500]
        base = {**base, "list_id": made.headers["location"].rsplit("/", 1)[-1]}
    form = {**base, field: value, "_csrf_token": token}
    form = {k: v for k, v in form.items() if v != "" or k in ("name", "keywords", "list_id")}
    answer = await client.post("/ui/ranktracking/new", data=form, headers={"x-csrf-token": token})
    assert answer.status_code == 422, answer.text[:500]
    shown = _errors(answer.text)
    assert shown, answer.text[:2000]
    assert any(m.startswith(f"{label}: ") for m in shown), (label, shown)
    for message in shown:
        for bad in FORBIDDEN:
            assert bad not in message, message
        # More than the label: what the field allows.
        assert len(message.split(": ", 1)[1]) > 8, message
    beside = re.search(rf'id="rt-err-{INPUT.get(field, field)}">(.*?)</p>', answer.text, re.DOTALL)
    assert beside is not None, answer.text[:3000]
    assert beside.group(1).startswith(f"{label}: "), beside.group(1)
