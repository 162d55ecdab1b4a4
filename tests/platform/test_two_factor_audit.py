"""Two-factor events in the organisation's audit log (issue 31, items 1 and 2): enrolment (from
the account page and during a sign-in the organisation requires it for), disabling (by the
person, or by an operator's command), new recovery codes, a recovery code used at sign-in (PL-2),
a burst of wrong codes the throttle stops (PL-6) and a change of the organisation's requirement
(PL-1, by an owner, with before and after). Each entry names who acted and from where, never a
code or the secret."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from sqlalchemy import select, text

from app.clock import ManualClock
from app.platform.audit.models import AuditEntry
from app.runtime import Runtime
from app.settings import Settings
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, post_form, sign_in
from tests.platform.test_cli import _cli
from tests.platform.test_two_factor_policy import ADMIN_EMAIL, _org_admin
from tests.platform.two_factor_support import (
    code,
    enrol,
    recovery_codes_on,
    secret_on,
    sign_in_with_code,
    submit_code,
)

NewClient = Callable[[], Awaitable[httpx.AsyncClient]]
UA = {"User-Agent": "two-factor-audit/1.0"}


async def two_factor_entries(runtime: Runtime) -> list[AuditEntry]:
    async with runtime.db.read() as session:
        return list(
            await session.scalars(
                select(AuditEntry)
                .where(AuditEntry.action.startswith("two_factor."))
                .order_by(AuditEntry.id)
            )
        )


async def _browser(new_client: NewClient, tenant: Tenant) -> httpx.AsyncClient:
    browser = await new_client()
    browser.headers.update(UA)
    r = await sign_in(browser, tenant.email, tenant.password)
    assert r.status_code in (302, 303), r.text
    return browser


async def _dump(runtime: Runtime) -> str:
    async with runtime.db.read() as session:
        rows = (await session.execute(text("SELECT * FROM audit_log"))).all()
    return " ".join(str(row) for row in rows)


async def test_enrol_new_codes_and_disable_from_the_account_page_are_recorded_pl2(
    runtime: Runtime, tenant: Tenant, new_client: NewClient, clock: ManualClock
) -> None:
    browser = await _browser(new_client, tenant)
    secret, codes = await enrol(browser, clock)
    clock.advance(30)
    wrong = await post_form(
        browser, "/ui/account/security", "/ui/account/security/disable", code="123456"
    )
    assert wrong.status_code == 422  # a refused code changes nothing and records nothing
    made = await post_form(
        browser,
        "/ui/account/security",
        "/ui/account/security/recovery-codes",
        code=code(secret, clock.now()),
    )
    assert made.status_code == 200
    new_codes = recovery_codes_on(made.text)
    clock.advance(30)
    done = await post_form(
        browser,
        "/ui/account/security",
        "/ui/account/security/disable",
        code=code(secret, clock.now()),
    )
    assert done.status_code in (302, 303)
    found = await two_factor_entries(runtime)
    assert [e.action for e in found] == [
        "two_factor.enrolled",
        "two_factor.recovery_codes_regenerated",
        "two_factor.disabled",
    ]
    for entry in found:
        assert (entry.actor_kind, entry.user_id) == ("user", tenant.user_id)
        assert (entry.object_type, entry.object_id) == ("user", str(tenant.user_id))
        assert entry.organisation_id == tenant.organisation_id
        assert (entry.client_address, entry.user_agent) == ("127.0.0.1", UA["User-Agent"])
    dumped = await _dump(runtime)
    for value in (secret, *codes, *new_codes):
        assert value not in dumped


async def test_a_recovery_code_used_at_sign_in_is_recorded_as_the_person_pl2(
    runtime: Runtime, tenant: Tenant, new_client: NewClient, clock: ManualClock
) -> None:
    browser = await _browser(new_client, tenant)
    secret, codes = await enrol(browser, clock)
    clock.advance(30)
    other = await new_client()
    other.headers.update(UA)
    by_app = await sign_in_with_code(
        other, tenant.email, tenant.password, code(secret, clock.now())
    )
    assert by_app.status_code in (302, 303)  # an app code is an ordinary sign-in
    later = await new_client()
    later.headers.update(UA)
    ok = await sign_in_with_code(later, tenant.email, tenant.password, codes[0])
    assert ok.status_code in (302, 303)
    used = [e for e in await two_factor_entries(runtime) if e.action != "two_factor.enrolled"]
    assert [e.action for e in used] == ["two_factor.recovery_code_used"]
    entry = used[0]
    assert (entry.actor_kind, entry.user_id, entry.object_id) == (
        "user",
        tenant.user_id,
        str(tenant.user_id),
    )
    assert (entry.organisation_id, entry.client_address) == (tenant.organisation_id, "127.0.0.1")
    assert codes[0] not in await _dump(runtime)


async def test_pl6_a_burst_of_wrong_codes_is_recorded_once_by_an_anonymous_caller(
    runtime: Runtime, tenant: Tenant, new_client: NewClient, clock: ManualClock
) -> None:
    browser = await _browser(new_client, tenant)
    secret, _ = await enrol(browser, clock)
    clock.advance(30)
    guesser = await new_client()
    first = await sign_in(guesser, tenant.email, tenant.password)
    assert first.headers["location"] == "/login/two-factor"
    wrong = "111111" if code(secret, clock.now()) != "111111" else "222222"
    # The password attempt stays counted: 9 wrong codes reach SIGN_IN_MAX_FAILURES (10).
    for _ in range(8):
        assert (await submit_code(guesser, wrong)).status_code == 401
    assert [e.action for e in await two_factor_entries(runtime)] == ["two_factor.enrolled"]
    assert (await submit_code(guesser, wrong)).status_code == 401
    for _ in range(2):
        assert (await submit_code(guesser, wrong)).status_code == 429
    bursts = [
        e for e in await two_factor_entries(runtime) if e.action == "two_factor.failed_code_burst"
    ]
    assert len(bursts) == 1
    entry = bursts[0]
    assert (entry.actor_kind, entry.user_id, entry.api_key_id) == ("anonymous", None, None)
    assert (entry.object_type, entry.object_id) == ("user", str(tenant.user_id))
    assert entry.organisation_id == tenant.organisation_id


async def test_pl1_the_requirement_changed_by_an_owner_with_before_and_after_and_enrolment_at_sign_in(
    runtime: Runtime, tenant: Tenant, new_client: NewClient, clock: ManualClock
) -> None:
    """The owner's change names the old and the new requirement; saving the same value again
    records nothing; the admin the requirement sends to enrolment is recorded enrolling as
    themself, though no session existed yet."""
    await _org_admin(runtime, tenant)
    owner = await _browser(new_client, tenant)
    await enrol(owner, clock)
    page = "/ui/organisation/security"
    for _ in range(2):
        saved = await post_form(owner, page, page, two_factor_required="owners_and_admins")
        assert saved.status_code == 200, saved.text
    changed = [
        e for e in await two_factor_entries(runtime) if e.action == "two_factor.requirement_changed"
    ]
    assert len(changed) == 1
    entry = changed[0]
    assert (entry.actor_kind, entry.user_id) == ("user", tenant.user_id)
    assert (entry.object_type, entry.object_id) == ("organisation", str(tenant.organisation_id))
    assert entry.before == {"two_factor_required": "off"}
    assert entry.after == {"two_factor_required": "owners_and_admins", "sessions_ended": 0}

    admin = await new_client()
    admin.headers.update(UA)
    first = await sign_in(admin, ADMIN_EMAIL, tenant.password)
    assert first.headers["location"] == "/login/two-factor/enrol"
    enrol_page = await admin.get("/login/two-factor/enrol")
    secret = secret_on(enrol_page.text)
    done = await admin.post(
        "/login/two-factor/enrol",
        data={"code": code(secret, clock.now()), "_csrf_token": csrf_from(enrol_page.text)},
    )
    assert done.status_code == 200
    async with runtime.db.read() as session:
        from app.platform.models import User

        admin_id = await session.scalar(select(User.id).where(User.email == ADMIN_EMAIL))
    enrolled = [
        e
        for e in await two_factor_entries(runtime)
        if e.action == "two_factor.enrolled" and e.object_id == str(admin_id)
    ]
    assert len(enrolled) == 1
    assert (enrolled[0].actor_kind, enrolled[0].user_id) == ("user", admin_id)
    assert enrolled[0].user_agent == UA["User-Agent"]


async def test_an_operator_removing_a_second_factor_is_recorded_as_the_system(
    settings: Settings, runtime: Runtime, tenant: Tenant, new_client: NewClient, clock: ManualClock
) -> None:
    browser = await _browser(new_client, tenant)
    await enrol(browser, clock)
    done = _cli(settings, "reset-two-factor", "--email", tenant.email)
    assert done.returncode == 0, done.stderr
    removed = [e for e in await two_factor_entries(runtime) if e.action == "two_factor.disabled"]
    assert len(removed) == 1
    entry = removed[0]
    assert (entry.actor_kind, entry.user_id, entry.client_address) == ("system", None, "")
    assert (entry.object_id, entry.organisation_id) == (str(tenant.user_id), tenant.organisation_id)
    assert entry.after == {"by": "an operator (python -m app reset-two-factor)"}
