"""Two-factor sign-in (issue 31, item 2; PL-6 for the throttle of the second step): TOTP per
RFC 6238, enrolment with a locally drawn QR code, recovery codes shown once and used once, a
session only after the second step, replayed codes refused, and the sign-in throttle covering
wrong codes (429)."""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, timedelta

import httpx
import pyotp
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.platform import signin_challenge, totp
from app.platform.two_factor_models import RecoveryCode, UserTotp
from app.runtime import Runtime
from app.settings import Settings
from tests.factories import Tenant
from tests.platform.conftest import csrf_from, post_form, sign_in
from tests.platform.test_cli import _cli
from tests.platform.two_factor_support import (
    code,
    enrol,
    recovery_codes_on,
    sign_in_with_code,
    submit_code,
)

# -- the algorithm -----------------------------------------------------------------------------

# RFC 6238 appendix B: the seeds are ASCII "1234567890" repeated to the hash's key length.
_SEEDS = {
    "sha1": b"12345678901234567890",
    "sha256": b"12345678901234567890123456789012",
    "sha512": b"1234567890123456789012345678901234567890123456789012345678901234",
}
_VECTORS = [
    (59, "94287082", "46119246", "90693936"),
    (1111111109, "07081804", "68084774", "25091201"),
    (1111111111, "14050471", "67062674", "99943326"),
    (1234567890, "89005924", "91819424", "93441116"),
    (2000000000, "69279037", "90698825", "38618901"),
    (20000000000, "65353130", "77737706", "47863826"),
]


@pytest.mark.parametrize(("seconds", "sha1", "sha256", "sha512"), _VECTORS)
def test_rfc6238_test_vectors(seconds: int, sha1: str, sha256: str, sha512: str) -> None:
    at = datetime.fromtimestamp(seconds, UTC)
    for digest, expected in (("sha1", sha1), ("sha256", sha256), ("sha512", sha512)):
        step = totp.time_step(at)
        assert totp.hotp(_SEEDS[digest], step, digits=8, digest=digest) == expected


def test_codes_agree_with_an_independent_implementation() -> None:
    secret = totp.new_secret()
    assert len(totp.secret_bytes(secret)) == 20
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    for n in range(0, 3600, 7):
        at = start + timedelta(seconds=n)
        assert totp.code_at(secret, at) == pyotp.TOTP(secret).at(at)
    uri = totp.provisioning_uri(secret, account="ada@example.test", issuer="Sweepline")
    parsed = pyotp.parse_uri(uri)
    assert parsed.secret == secret
    assert parsed.issuer == "Sweepline"


def test_one_step_either_side_is_accepted_and_a_used_step_is_not() -> None:
    secret = totp.new_secret()
    now = datetime(2026, 3, 2, 9, 0, 15, tzinfo=UTC)
    step = totp.time_step(now)
    for offset in (-1, 0, 1):
        previous = now + timedelta(seconds=30 * offset)
        assert totp.matching_step(secret, code(secret, previous), now, last_used_step=None) == (
            step + offset
        )
    for offset in (-2, 2):
        far = code(secret, now + timedelta(seconds=30 * offset))
        assert totp.matching_step(secret, far, now, last_used_step=None) is None
    current = code(secret, now)
    assert totp.matching_step(secret, current, now, last_used_step=step) is None  # replay
    earlier = code(secret, now - timedelta(seconds=30))
    assert totp.matching_step(secret, earlier, now, last_used_step=step) is None
    assert totp.matching_step(secret, "12345", now, last_used_step=None) is None
    assert totp.matching_step(secret, "abcdef", now, last_used_step=None) is None


def test_the_sign_in_challenge_is_signed_and_expires() -> None:
    now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    token = signin_challenge.issue("s3cret", user_id=7, stage="code", next="/x", now=now)
    read = signin_challenge.read("s3cret", token, now + timedelta(minutes=4))
    assert read is not None
    assert (read.user_id, read.stage, read.next) == (7, "code", "/x")
    assert signin_challenge.read("s3cret", token, now + timedelta(minutes=5)) is None
    assert signin_challenge.read("other", token, now) is None
    mac = token.partition(".")[2]
    forged = signin_challenge.issue("x", user_id=8, stage="code", next="/x", now=now)
    assert signin_challenge.read("s3cret", f"{forged.partition('.')[0]}.{mac}", now) is None
    assert signin_challenge.read("s3cret", "garbage", now) is None


# -- over HTTP ---------------------------------------------------------------------------------


async def _signed_in(client: httpx.AsyncClient, tenant: Tenant) -> None:
    r = await sign_in(client, tenant.email, tenant.password)
    assert r.status_code in (302, 303)
    assert r.headers["location"] == "/"


async def test_enrolment_shows_a_local_qr_code_and_needs_a_code(
    client: httpx.AsyncClient, tenant: Tenant, clock: ManualClock, runtime: Runtime
) -> None:
    """The QR code is inline SVG made on the server (no outside image); enrolment is active only
    once a code confirms it; the recovery codes are stored as hashes."""
    await _signed_in(client, tenant)
    page = await client.get("/ui/account/security")
    assert page.status_code == 200
    assert '<svg role="img"' in page.text
    assert "<script" not in page.text.split("<main", 1)[1]
    assert "http" not in page.text.split('id="two-factor-qr"', 1)[1].split("</figure>", 1)[0]
    wrong = await post_form(
        client, "/ui/account/security", "/ui/account/security/enrol", code="000000"
    )
    assert wrong.status_code == 422
    # Not active yet: signing in again asks for no code.
    other = httpx.AsyncClient(transport=client._transport, base_url="http://testserver")
    async with other:
        await _signed_in(other, tenant)
    secret, codes = await enrol(client, clock)
    async with runtime.db.read() as session:
        row = await session.scalar(select(UserTotp).where(UserTotp.user_id == tenant.user_id))
        stored = list(await session.scalars(select(RecoveryCode.code_hash)))
    assert row is not None
    assert row.confirmed_at == clock.now()
    assert secret.encode() not in row.secret_encrypted  # encrypted at rest
    assert len(stored) == 10
    plain = {c.replace("-", "") for c in codes} | set(codes)
    assert not plain & set(stored)
    assert not {hashlib.sha256(c.encode()).hexdigest() for c in plain} & set(stored)
    again = await client.get("/ui/account/security")
    assert "10 of 10 recovery codes left" in again.text
    assert "two-factor-secret" not in again.text  # the secret is not shown again


async def test_sign_in_asks_for_the_code_before_any_session(
    client: httpx.AsyncClient,
    new_client: object,
    tenant: Tenant,
    clock: ManualClock,
) -> None:
    await _signed_in(client, tenant)
    secret, _ = await enrol(client, clock)
    clock.advance(30)
    browser: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    first = await sign_in(browser, tenant.email, tenant.password)
    assert first.headers["location"] == "/login/two-factor"
    assert "swl_session" not in first.cookies
    assert "swl_signin" in first.cookies
    # The challenge opens nothing but the code page.
    home = await browser.get("/")
    assert home.status_code in (302, 303)
    assert home.headers["location"].startswith("/login")
    wrong = await submit_code(browser, "000000" if code(secret, clock.now()) != "000000" else "1")
    assert wrong.status_code == 401
    assert "swl_session" not in wrong.cookies
    right = await submit_code(browser, code(secret, clock.now()))
    assert right.status_code in (302, 303)
    assert right.headers["location"] == "/"
    assert "swl_session" in right.cookies
    assert (await browser.get("/")).status_code == 200


async def test_a_code_is_not_accepted_twice(
    client: httpx.AsyncClient, new_client: object, tenant: Tenant, clock: ManualClock
) -> None:
    """Replay: the code that signed one browser in cannot sign in another in the same step."""
    await _signed_in(client, tenant)
    secret, _ = await enrol(client, clock)
    clock.advance(30)
    current = code(secret, clock.now())
    one: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    two: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    ok = await sign_in_with_code(one, tenant.email, tenant.password, current)
    assert ok.status_code in (302, 303)
    replay = await sign_in_with_code(two, tenant.email, tenant.password, current)
    assert replay.status_code == 401
    clock.advance(30)
    fresh = await submit_code(two, code(secret, clock.now()))
    assert fresh.status_code in (302, 303)


async def test_a_recovery_code_works_once(
    client: httpx.AsyncClient,
    new_client: object,
    tenant: Tenant,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _signed_in(client, tenant)
    _, codes = await enrol(client, clock)
    one: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    with caplog.at_level(logging.WARNING, logger="app.security.two_factor"):
        ok = await sign_in_with_code(one, tenant.email, tenant.password, codes[3].upper())
    assert ok.status_code in (302, 303)
    assert "two_factor.recovery_code_used" in caplog.text
    two: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    again = await sign_in_with_code(two, tenant.email, tenant.password, codes[3])
    assert again.status_code == 401
    other = await submit_code(two, codes[4])
    assert other.status_code in (302, 303)
    page = await client.get("/ui/account/security")
    assert "8 of 10 recovery codes left" in page.text


async def test_pl6_wrong_codes_are_throttled_like_passwords(
    client: httpx.AsyncClient,
    new_client: object,
    tenant: Tenant,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PL-6 covers the second step: the password attempt stays counted until the code passes,
    each wrong code counts, and at SIGN_IN_MAX_FAILURES (10) even the right code answers 429.
    Signing in with the password again buys no fresh guesses."""
    await _signed_in(client, tenant)
    secret, _ = await enrol(client, clock)
    clock.advance(30)
    browser: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    first = await sign_in(browser, tenant.email, tenant.password)
    assert first.headers["location"] == "/login/two-factor"
    right = code(secret, clock.now())
    wrong = "111111" if right != "111111" else "222222"
    with caplog.at_level(logging.WARNING, logger="app.security.two_factor"):
        for _ in range(9):
            assert (await submit_code(browser, wrong)).status_code == 401
    assert "two_factor.failed_code_burst" in caplog.text
    refused = await submit_code(browser, right)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.text
    assert "swl_session" not in refused.cookies
    again = await sign_in(browser, tenant.email, tenant.password)
    assert again.status_code == 429
    clock.advance(15 * 60)
    later = await sign_in_with_code(
        browser, tenant.email, tenant.password, code(secret, clock.now())
    )
    assert later.status_code in (302, 303)


async def test_the_challenge_expires_after_five_minutes(
    client: httpx.AsyncClient, new_client: object, tenant: Tenant, clock: ManualClock
) -> None:
    await _signed_in(client, tenant)
    secret, _ = await enrol(client, clock)
    browser: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    await sign_in(browser, tenant.email, tenant.password)
    page = await browser.get("/login/two-factor")
    clock.advance(5 * 60 + 1)
    late = await browser.post(
        "/login/two-factor",
        data={"code": code(secret, clock.now()), "_csrf_token": csrf_from(page.text)},
    )
    assert late.status_code in (302, 303)
    assert late.headers["location"] == "/login"
    assert "swl_session" not in late.cookies


async def test_the_code_page_without_a_challenge_sends_to_sign_in(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/login/two-factor", "/login/two-factor/enrol"):
        r = await client.get(path)
        assert r.status_code in (302, 303)
        assert r.headers["location"] == "/login"


async def test_disable_needs_a_current_code(
    client: httpx.AsyncClient,
    new_client: object,
    tenant: Tenant,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _signed_in(client, tenant)
    secret, _ = await enrol(client, clock)
    clock.advance(30)
    refused = await post_form(
        client, "/ui/account/security", "/ui/account/security/disable", code="123456"
    )
    assert refused.status_code == 422
    assert "code" in refused.text
    with caplog.at_level(logging.WARNING, logger="app.security.two_factor"):
        done = await post_form(
            client,
            "/ui/account/security",
            "/ui/account/security/disable",
            code=code(secret, clock.now()),
        )
    assert done.status_code in (302, 303)
    assert "two_factor.disabled" in caplog.text
    browser: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    await _signed_in(browser, tenant)  # straight into a session again


async def test_new_recovery_codes_replace_the_old(
    client: httpx.AsyncClient, new_client: object, tenant: Tenant, clock: ManualClock
) -> None:
    await _signed_in(client, tenant)
    secret, old = await enrol(client, clock)
    clock.advance(30)
    made = await post_form(
        client,
        "/ui/account/security",
        "/ui/account/security/recovery-codes",
        code=code(secret, clock.now()),
    )
    assert made.status_code == 200
    new = recovery_codes_on(made.text)
    assert len(new) == 10
    assert not set(new) & set(old)
    browser: httpx.AsyncClient = await new_client()  # type: ignore[operator]
    stale = await sign_in_with_code(browser, tenant.email, tenant.password, old[0])
    assert stale.status_code == 401
    fresh = await submit_code(browser, new[0])
    assert fresh.status_code in (302, 303)


async def test_an_operator_removes_a_lost_second_factor(
    settings: Settings, client: httpx.AsyncClient, tenant: Tenant, clock: ManualClock
) -> None:
    """``reset-two-factor``: the person's second factor and sessions go; they sign in with the
    password alone again."""
    await _signed_in(client, tenant)
    await enrol(client, clock)
    done = _cli(settings, "reset-two-factor", "--email", tenant.email)
    assert done.returncode == 0, done.stderr
    assert "two-factor sign-in removed" in done.stdout
    assert (await client.get("/")).status_code in (302, 303)  # the session ended
    await _signed_in(client, tenant)
    unknown = _cli(settings, "reset-two-factor", "--email", "nobody@example.test")
    assert unknown.returncode == 1
    assert "no account" in unknown.stderr
