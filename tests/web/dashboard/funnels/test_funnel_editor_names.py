"""Tags, lists and fields created from inside the funnel editor (FN-80): the step's name becomes
the workspace's, so the validator stops refusing the draft; a refusal names the thing and what
is allowed, in words, and writes nothing; another workspace's funnel is a 404."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from app.engines.funnels.definitions import service
from app.engines.funnels.models import FieldDefinition, Tag
from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in
from tests.web.dashboard.funnels.test_funnel_editor_check import _funnel

TAGGING = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {"kind": "add_tag", "id": "t", "entry": True, "tag": "vip", "next": "l"},
        {"kind": "add_to_list", "id": "l", "list": "Newsletter", "next": "f"},
        {"kind": "set_field", "id": "f", "field": "plan", "value": "gold"},
    ],
}


async def _signed_in(client: httpx.AsyncClient, tenant: Tenant, funnel_id: int) -> dict[str, str]:
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    return {"x-csrf-token": token, "accept": "application/json"}


async def test_fn80_names_created_in_the_editor_clear_the_draft_for_publishing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    headers = await _signed_in(client, tenant, funnel_id)
    check = f"/ui/funnels/{funnel_id}/check"
    before = (await client.post(check, json={"definition": TAGGING}, headers=headers)).json()
    assert {p["node_id"] for p in before["problems"]} == {"t", "l", "f"}

    url = f"/ui/funnels/{funnel_id}/names"
    tag = await client.post(url, json={"kind": "tag", "name": " vip "}, headers=headers)
    assert tag.status_code == 201
    assert tag.json() == {"kind": "tag", "name": "vip", "names": ["vip"]}
    listed = await client.post(url, json={"kind": "list", "name": "Newsletter"}, headers=headers)
    assert listed.json()["names"] == ["Newsletter"]
    field = await client.post(
        url, json={"kind": "field", "name": "plan", "type": "text"}, headers=headers
    )
    assert field.status_code == 201
    assert {"name": "plan", "type": "text"} in field.json()["fields"]
    assert {"name": "email", "type": "text"} in field.json()["fields"]
    # Creating it again is no error: the name is there either way.
    again = await client.post(url, json={"kind": "tag", "name": "vip"}, headers=headers)
    assert again.status_code == 201

    after = (await client.post(check, json={"definition": TAGGING}, headers=headers)).json()
    assert after["problems"] == []
    async with runtime.db.write() as uow:
        await service.update_funnel(
            uow.session,
            tenant.workspace_id,
            funnel_id,
            definition=service.parse_definition(TAGGING),
            now=runtime.clock.now(),
        )
        version = await service.publish(
            uow.session, tenant.workspace_id, funnel_id, user_id=None, now=runtime.clock.now()
        )
    assert version.number == 1


async def test_fn80_refusals_are_plain_and_write_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    headers = await _signed_in(client, tenant, funnel_id)
    url = f"/ui/funnels/{funnel_id}/names"
    cases = [
        ({"kind": "tag", "name": "   "}, "name", "Tag name: 1 to 100 characters."),
        ({"kind": "list", "name": "x" * 101}, "name", "List name: 1 to 100 characters."),
        (
            {"kind": "field", "name": "2nd plan", "type": "text"},
            "name",
            "Field name: letters, digits and underscores, not starting with a digit",
        ),
        ({"kind": "field", "name": "p" * 65}, "name", "Field name: at most 64 characters."),
        ({"kind": "field", "name": "plan", "type": "colour"}, "type", "Field type: must be one of"),
    ]
    for body, field, words in cases:
        answer = await client.post(url, json=body, headers=headers)
        assert answer.status_code == 422, body
        error = answer.json()
        assert error["code"] == "validation_failed"
        assert error["message"].startswith(words), error
        assert error["details"][0]["field"] == field
        assert "[" not in error["message"]
        assert "Expected" not in error["message"]

    # A field that exists with another type is refused by name, not changed.
    ok = await client.post(
        url, json={"kind": "field", "name": "age", "type": "number"}, headers=headers
    )
    assert ok.status_code == 201
    clash = await client.post(
        url, json={"kind": "field", "name": "age", "type": "date"}, headers=headers
    )
    assert clash.status_code == 422
    assert clash.json()["message"] == "Field type: field 'age' already exists as number"

    async with runtime.db.read() as s:
        assert await s.scalar(select(func.count()).select_from(Tag)) == 0
        assert await s.scalar(select(func.count()).select_from(FieldDefinition)) == 1

    theirs = await _funnel(runtime, other_tenant)
    foreign = await client.post(
        f"/ui/funnels/{theirs}/names", json={"kind": "tag", "name": "vip"}, headers=headers
    )
    assert foreign.status_code == 404
