"""The funnel editor's check endpoint: the validator run on the graph the editor holds, unsaved,
with problems pinned on their node and worded with the form's labels (FN-21 … FN-26); only a
signed-in member of the funnel's workspace may call it."""

from __future__ import annotations

import httpx

from app.engines.funnels.definitions import service
from app.runtime import Runtime
from app.web.dashboard.funnel_editor import decode_problem, plain
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in


async def _funnel(runtime: Runtime, tenant: Tenant) -> int:
    async with runtime.db.write() as uow:
        funnel = await service.create_funnel(
            uow.session,
            tenant.workspace_id,
            "F",
            service.parse_definition({"nodes": []}),
            runtime.clock.now(),
        )
    return funnel.id


async def test_check_pins_plain_problems_and_saves_nothing(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    graph = {
        "triggers": [{"kind": "manual"}],
        "nodes": [{"kind": "send_email", "id": "hello", "entry": True, "body": "Hi"}],
    }
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/check",
        json={"definition": graph},
        headers={"x-csrf-token": token},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["problems"] == [
        {
            "node_id": "hello",
            "rule": "FN-24",
            "code": "required",
            "message": "Step 'hello' — Subject: enter text; it cannot be empty",
            "field": "subject",
        }
    ]
    # Not saved: the draft is still the empty graph.
    async with runtime.db.read() as s:
        assert (await service.get_funnel(s, tenant.workspace_id, funnel_id)).draft["nodes"] == []

    typed = {"nodes": [{"kind": "wait", "id": "w", "entry": True, "days": "two"}]}
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/check",
        json={"definition": typed},
        headers={"x-csrf-token": token},
    )
    assert answer.json()["problems"] == [
        {
            "node_id": "w",
            "rule": "FN-26",
            "code": "schema",
            "message": (
                "Step 'w' — Days: a whole number of days, 0 or more; a wait takes one of a "
                "duration, a date and time, a weekday or a date field"
            ),
            "field": "days",
        }
    ]


async def test_check_needs_a_signed_in_member_of_the_workspace(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    anonymous = await client.post(f"/ui/funnels/{funnel_id}/check", json={"definition": {}})
    assert anonymous.status_code in (401, 403, 303)
    await sign_in(client, other_tenant.email, other_tenant.password)
    token = csrf_from((await client.get("/ui/funnels")).text)
    foreign = await client.post(
        f"/ui/funnels/{funnel_id}/check", json={"definition": {}}, headers={"x-csrf-token": token}
    )
    assert foreign.status_code == 404


def test_messages_use_the_forms_labels() -> None:
    assert plain("create_payment needs a positive amount_minor", "create_payment") == (
        "Create payment needs a positive amount in cents"
    )
    assert plain("a condition needs both a 'yes' and a 'no' branch", "condition") == (
        "A condition needs both a Yes and a No branch"
    )
    assert plain("a throttle needs limit > 0", "throttle") == "A throttle needs limit > 0"
    raw = {"nodes": [{"kind": "send_email", "id": "a", "foo": 1}]}
    assert decode_problem(raw, "Object contains unknown field `foo` - at `$.nodes[0]`") == {
        "node_id": "a",
        "rule": "FN-26",
        "code": "schema",
        "message": "Step 'a' — “foo” is not a setting of this step: leave it out",
        "field": "foo",
    }


async def test_the_editor_explains_channel_fields_and_offers_a_failure_branch(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    """Each message kind's panel says what the contact needs; effect nodes have a second way
    out ('If it cannot go out'); a push node without a token field is pinned before publishing."""
    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    async with runtime.db.read() as s:
        from app.web.dashboard.funnel_editor import editor_data

        data = await editor_data(s, tenant.workspace_id, funnel_id, [])
    assert "address_postal_code" in data["help"]["send_letter"]
    assert "push_token" in data["help"]["send_push"]
    assert ["on_failure", "If it cannot go out"] in data["ports"]["send_sms"]
    assert data["ports"]["wait"] == [["next", "Then"], ["event_next", "On the event"]]
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    graph = {"nodes": [{"kind": "send_push", "id": "p", "entry": True, "title": "t", "body": "b"}]}
    answer = await client.post(
        f"/ui/funnels/{funnel_id}/check",
        json={"definition": graph},
        headers={"x-csrf-token": token},
    )
    [problem] = answer.json()["problems"]
    assert (problem["node_id"], problem["code"]) == ("p", "channel_field")
    assert problem["message"].startswith("Step 'p' — Send push reads the contact's 'push_token'")
