"""The 404 page's workspace hint and the switch's landing page (PL-1), over HTTP: a workspace is
named only to its members, only dashboard paths are looked at, and the switch lands on a
same-site path only."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.platform import service
from app.runtime import Runtime
from tests.engines.ranktracking.factories import make_list
from tests.factories import Tenant
from tests.platform.conftest import post_form, sign_in

HINT = "/ui/workspace/partials/hint"


async def _second(runtime: Runtime, tenant: Tenant) -> Tenant:
    async with runtime.db.write() as uow:
        second = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=tenant.organisation_id,
            name="Acme second",
            now=runtime.clock.now(),
        )
        await service.add_member(
            uow.session, user_id=tenant.user_id, workspace_id=second.workspace.id, role="member"
        )
    return dataclasses.replace(tenant, workspace_id=second.workspace.id)


async def test_pl1_the_hint_names_only_the_persons_own_workspaces(
    new_client: Any, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    second = await _second(runtime, tenant)
    mine = await make_list(runtime, second, ["a"], name="Mine")
    foreign = await make_list(runtime, other_tenant, ["b"], name="Foreign")
    here = await make_list(runtime, tenant, ["c"], name="Here")
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)

    page = await browser.get(f"/ui/ranktracking/lists/{mine.id}", headers={"accept": "text/html"})
    assert page.status_code == 404
    assert HINT in page.text

    hint = (await browser.get(HINT, params={"path": f"/ui/ranktracking/lists/{mine.id}"})).text
    assert "Acme second" in hint
    assert f'name="workspace_id" value="{second.workspace_id}"' in hint

    plain = (await browser.get(HINT, params={"path": "/ui/ranktracking/lists/0"})).text
    for path in (
        f"/ui/ranktracking/lists/{foreign.id}",  # a workspace the person is not a member of
        f"/ui/ranktracking/lists/{here.id}",  # the current workspace: nothing to switch to
        f"/ui/ranktracking/lists/{10**30}",  # past any id
        f"/api/v1/ranktracking/lists/{mine.id}",  # not a dashboard path
        "",
    ):
        answer = await browser.get(HINT, params={"path": path})
        assert answer.status_code == 200
        assert answer.text == plain
    assert "Globex" not in plain
    assert "workspace_id" not in plain


async def test_pl1_the_switch_lands_on_a_same_site_path_only(
    new_client: Any, runtime: Runtime, tenant: Tenant
) -> None:
    second = await _second(runtime, tenant)
    browser = await new_client()
    await sign_in(browser, tenant.email, tenant.password)
    for target, landing in (
        ("/ui/ranktracking/lists", "/ui/ranktracking/lists"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
    ):
        r = await post_form(
            browser,
            "/ui/workspace",
            "/ui/workspace/switch",
            workspace_id=str(second.workspace_id),
            next=target,
        )
        assert r.status_code in (302, 303)
        assert r.headers["location"] == landing
