"""The organisation's two-factor requirement (issue 31, item 2): off, owners and admins, or
everyone; set by owners only; a person it applies to who has not enrolled is sent to enrolment
right after the password and has no session until enrolled; API keys are not affected."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from app.clock import ManualClock
from app.platform import service
from app.platform.two_factor_policy import applies
from app.runtime import Runtime
from tests.conftest import auth
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, post_form, sign_in
from tests.platform.two_factor_support import code, enrol, recovery_codes_on, secret_on

NewClient = Callable[[], Awaitable[httpx.AsyncClient]]
ADMIN_EMAIL = "org-admin@acme.test"


@pytest.mark.parametrize(
    ("requirement", "role", "expected"),
    [
        ("off", "owner", False),
        ("off", "member", False),
        ("owners_and_admins", "owner", True),
        ("owners_and_admins", "admin", True),
        ("owners_and_admins", "member", False),
        ("everyone", "owner", True),
        ("everyone", "admin", True),
        ("everyone", "member", True),
        ("nonsense", "owner", False),
    ],
)
def test_who_the_requirement_applies_to(requirement: str, role: str, expected: bool) -> None:
    assert applies(requirement, role) is expected


async def _org_admin(runtime: Runtime, tenant: Tenant) -> None:
    async with runtime.db.write() as uow:
        user = await service.create_user(
            uow.session,
            organisation_id=tenant.organisation_id,
            email=ADMIN_EMAIL,
            password=tenant.password,
            now=runtime.clock.now(),
            org_role="admin",
        )
        await service.add_member(
            uow.session, user_id=user.id, workspace_id=tenant.workspace_id, role="admin"
        )


async def _owner_requires(
    client: httpx.AsyncClient, tenant: Tenant, clock: ManualClock, value: str
) -> httpx.Response:
    return await post_form(
        client, "/ui/organisation/security", "/ui/organisation/security", two_factor_required=value
    )


async def test_only_owners_set_it_and_only_once_enrolled_themselves(
    client: httpx.AsyncClient,
    new_client: NewClient,
    runtime: Runtime,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    await _org_admin(runtime, tenant)
    admin = await new_client()
    assert (await sign_in(admin, ADMIN_EMAIL, tenant.password)).status_code in (302, 303)
    assert (await admin.get("/ui/organisation/security")).status_code == 403
    await sign_in(client, tenant.email, tenant.password)
    refused = await _owner_requires(client, tenant, clock, "owners_and_admins")
    assert refused.status_code == 409
    assert "yourself first" in refused.text
    bad = await _owner_requires(client, tenant, clock, "sometimes")
    assert bad.status_code == 422
    assert "two_factor_required" in bad.text
    await enrol(client, clock)
    saved = await _owner_requires(client, tenant, clock, "owners_and_admins")
    assert saved.status_code == 200
    assert 'value="owners_and_admins" checked' in saved.text
    # The admin had a session and no second factor: it has ended.
    gone = await admin.get("/")
    assert gone.status_code in (302, 303)
    assert gone.headers["location"].startswith("/login")


async def test_owners_and_admins_required_sends_an_admin_to_enrolment(
    client: httpx.AsyncClient,
    new_client: NewClient,
    runtime: Runtime,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    await _org_admin(runtime, tenant)
    await sign_in(client, tenant.email, tenant.password)
    await enrol(client, clock)
    assert (await _owner_requires(client, tenant, clock, "owners_and_admins")).status_code == 200
    # A member is not concerned: straight into a session.
    member = await new_client()
    plain = await sign_in(member, tenant.member_email, tenant.member_password)
    assert plain.headers["location"] == "/"
    assert (await member.get("/")).status_code == 200
    # The admin must enrol, and can do nothing else meanwhile.
    admin = await new_client()
    first = await sign_in(admin, ADMIN_EMAIL, tenant.password)
    assert first.headers["location"] == "/login/two-factor/enrol"
    assert "swl_session" not in first.cookies
    for path in ("/", "/ui/workspace", "/ui/account/security", "/login/two-factor"):
        blocked = await admin.get(path)
        assert blocked.status_code in (302, 303), path
        assert blocked.headers["location"].startswith("/login"), path
    page = await admin.get("/login/two-factor/enrol")
    assert page.status_code == 200
    assert '<svg role="img"' in page.text
    secret = secret_on(page.text)
    assert secret_on((await admin.get("/login/two-factor/enrol")).text) == secret  # same secret
    wrong = await admin.post(
        "/login/two-factor/enrol", data={"code": "12", "_csrf_token": csrf_from(page.text)}
    )
    assert wrong.status_code == 422
    done = await admin.post(
        "/login/two-factor/enrol",
        data={"code": code(secret, clock.now()), "_csrf_token": csrf_from(page.text)},
    )
    assert done.status_code == 200
    assert len(recovery_codes_on(done.text)) == 10
    assert "swl_session" in done.cookies
    assert (await admin.get("/")).status_code == 200
    # Once enrolled, the next sign-in asks for a code; turning it off is refused.
    clock.advance(30)
    refused = await post_form(
        admin,
        "/ui/account/security",
        "/ui/account/security/disable",
        code=code(secret, clock.now()),
    )
    assert refused.status_code == 409
    assert "requires two-factor" in refused.text
    again = await new_client()
    assert (await sign_in(again, ADMIN_EMAIL, tenant.password)).headers[
        "location"
    ] == "/login/two-factor"


async def test_everyone_required_applies_to_members_and_not_to_api_keys(
    client: httpx.AsyncClient,
    new_client: NewClient,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    member = await new_client()
    await sign_in(member, tenant.member_email, tenant.member_password)
    assert (await member.get("/")).status_code == 200
    await sign_in(client, tenant.email, tenant.password)
    await enrol(client, clock)
    saved = await _owner_requires(client, tenant, clock, "everyone")
    assert saved.status_code == 200
    assert "1 sessions of people not yet enrolled ended" in saved.text
    assert (await member.get("/")).status_code in (302, 303)
    first = await sign_in(member, tenant.member_email, tenant.member_password)
    assert first.headers["location"] == "/login/two-factor/enrol"
    # The owner's own session goes on (enrolled), and programs with keys are not asked.
    assert (await client.get("/")).status_code == 200
    api = await client.get("/api/v1/jobs", headers=auth(tenant))
    assert api.status_code == 200
    # Back to off: members sign in with the password alone again.
    assert (await _owner_requires(client, tenant, clock, "off")).status_code == 200
    plain = await new_client()
    assert (await sign_in(plain, tenant.member_email, tenant.member_password)).headers[
        "location"
    ] == "/"
