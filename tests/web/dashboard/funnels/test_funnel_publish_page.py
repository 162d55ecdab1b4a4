"""Publishing from the editor (FN-1): what the editor holds is saved first; a graph the validator
refuses stays saved as the draft, with its problems on the page, and no version is made; a valid
one becomes version 1 in the same request."""

from __future__ import annotations

import json

import httpx

from app.engines.funnels.definitions import service
from app.runtime import Runtime
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, sign_in

BROKEN = {
    "triggers": [{"kind": "manual"}],
    "nodes": [{"kind": "send_email", "id": "hello", "entry": True, "body": "Hi"}],
}
FIXED = {
    "triggers": [{"kind": "manual"}],
    "nodes": [
        {"kind": "send_email", "id": "hello", "entry": True, "subject": "Hello", "body": "Hi"}
    ],
}


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


async def _publish(
    client: httpx.AsyncClient, funnel_id: int, graph: dict[str, object]
) -> httpx.Response:
    token = csrf_from((await client.get(f"/ui/funnels/{funnel_id}")).text)
    return await client.post(
        f"/ui/funnels/{funnel_id}/publish",
        data={"_csrf_token": token, "name": "F", "definition": json.dumps(graph)},
    )


async def test_a_refused_publication_keeps_the_draft_and_makes_no_version(
    client: httpx.AsyncClient, runtime: Runtime, tenant: Tenant
) -> None:
    funnel_id = await _funnel(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)

    refused = await _publish(client, funnel_id, BROKEN)
    assert refused.status_code == 200, refused.text
    assert "Not published: fix the problems below first. The draft is saved." in refused.text
    async with runtime.db.read() as s:
        funnel = await service.get_funnel(s, tenant.workspace_id, funnel_id)
        assert funnel.draft["nodes"][0]["id"] == "hello"
        assert funnel.current_version_id is None
        assert await service.versions(s, tenant.workspace_id, funnel_id) == []

    published = await _publish(client, funnel_id, FIXED)
    assert published.status_code in (302, 303), published.text
    assert "Published%20version%201" in published.headers["location"]
    async with runtime.db.read() as s:
        versions = await service.versions(s, tenant.workspace_id, funnel_id)
        assert [v.number for v in versions] == [1]
