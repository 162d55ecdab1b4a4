"""The address guard on every URL a user or a workspace sets (issue: SSRF through provider base
URLs): refused at configuration and at connection, in every encoding of the private, loopback,
link-local and metadata ranges, behind a name and behind a redirect; a loopback receiver records
nothing. Allowed targets are a real HTTP server on loopback, reached only when the operator
allows private targets."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar import Litestar, Request, get, post
from litestar.response import Redirect

from app.integrations.http_guard import (
    AD_RULES_SCHEDULE,
    AddressGuard,
    GuardedHttp,
    HttpRequest,
    PermanentError,
    ProviderHttp,
    RetryLog,
    RetryPolicy,
    StaticResolver,
    TargetRefused,
    TransientError,
)
from app.sandbox.base import SandboxState, serve_in_loop

# {port} is the loopback receiver's port: a refused form that would have reached it.
HOSTILE = [
    "http://127.0.0.1:{port}/",
    "http://localhost:{port}/",
    "http://LOCALHOST.:{port}/",
    "http://2130706433:{port}/",  # decimal 127.0.0.1
    "http://0x7f000001:{port}/",  # hexadecimal
    "http://0x7f.1:{port}/",  # hexadecimal, short form
    "http://127.1:{port}/",  # short form
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]:{port}/",  # the same, in hex groups
    "http://[64:ff9b::7f00:1]:{port}/",  # NAT64
    "http://10.0.0.1/",
    "http://172.16.3.4/",
    "http://192.168.1.20/",
    "http://3232235796/",  # decimal 192.168.1.20
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://[fd00::1]/",  # unique local
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://2852039166/latest/meta-data/",  # the same, decimal
    "http://0xa9fea9fe/",  # the same, hexadecimal
    "http://[::ffff:169.254.169.254]/",  # the same, IPv4-mapped
    "http://[fd00:ec2::254]/",  # AWS metadata over IPv6
    "http://[fe80::1]/",  # link-local
    "http://0.0.0.0:{port}/",
    "http://inside.rebind.test:{port}/",  # a name resolving to loopback
    "http://mixed.rebind.test:{port}/",  # one private address among public ones
]
RESOLVER = StaticResolver(
    {
        "inside.rebind.test": ["127.0.0.1"],
        "mixed.rebind.test": ["93.184.216.34", "127.0.0.1"],
        "localhost": ["127.0.0.1", "::1"],
    }
)


def receiver_app(state: SandboxState) -> Litestar:
    @post(["/", "/{rest:path}"], status_code=200)
    async def anything(request: Request) -> dict[str, str]:  # type: ignore[type-arg]
        state.hit("received")
        return {"ok": "yes", "authorization": request.headers.get("authorization", "")}

    @get(["/", "/{rest:path}"])
    async def anything_get() -> dict[str, str]:
        state.hit("received")
        return {"ok": "yes"}

    @post("/bounce", status_code=200)
    async def bounce(request: Request) -> Redirect:  # type: ignore[type-arg]
        state.hit("bounce")
        return Redirect(request.query_params["to"], status_code=307)

    return Litestar([bounce, anything, anything_get])


@pytest.fixture(scope="module")
async def receiver() -> AsyncIterator[tuple[str, SandboxState]]:
    state = SandboxState()
    async with serve_in_loop(receiver_app(state)) as url:
        yield url, state


@pytest.fixture
def target(receiver: tuple[str, SandboxState]) -> tuple[str, int, SandboxState]:
    url, state = receiver
    state.reset_counts()
    return url, int(url.rsplit(":", 1)[1]), state


@pytest.mark.parametrize("form", HOSTILE)
async def test_refused_at_configuration(form: str, target: tuple[str, int, SandboxState]) -> None:
    _url, port, state = target
    guard = AddressGuard(resolver=RESOLVER)
    with pytest.raises(TargetRefused):
        await guard.check_url(form.format(port=port), provider="payments")
    assert state.count() == 0


@pytest.mark.parametrize("form", HOSTILE)
async def test_refused_at_send_by_a_provider_client(
    form: str, target: tuple[str, int, SandboxState]
) -> None:
    """A base URL that got past configuration (stored before, or a name that changed its
    answer) is refused again when the client connects: the credential never leaves."""
    _url, port, state = target
    http = ProviderHttp(
        provider="payments",
        base_url=form.format(port=port),
        headers={"Authorization": "Bearer sk_live_secret"},
        policy=RetryPolicy(attempts=1),
        guard=AddressGuard(resolver=RESOLVER),
    )
    try:
        with pytest.raises(TargetRefused) as info:
            await http.send("POST", "/v1/payment_intents", form={"amount": "100"})
    finally:
        await http.aclose()
    assert not info.value.transient
    assert "sk_live_secret" not in str(info.value)
    assert state.count() == 0


@pytest.mark.parametrize("form", HOSTILE)
async def test_refused_at_send_by_a_webhook(
    form: str, target: tuple[str, int, SandboxState]
) -> None:
    _url, port, state = target
    http = GuardedHttp(guard=AddressGuard(resolver=RESOLVER), policy=RetryPolicy(attempts=1))
    try:
        with pytest.raises(TargetRefused):
            await http.request(
                HttpRequest(method="POST", url=form.format(port=port), body="{}"),
                allow_private=False,
            )
    finally:
        await http.aclose()
    assert state.count() == 0


@pytest.mark.parametrize(
    "hop",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0:{port}/",
    ],
)
async def test_a_redirect_is_checked_again(hop: str, target: tuple[str, int, SandboxState]) -> None:
    """Even where the operator allows private targets (the first hop is the loopback receiver),
    a redirect to a metadata or unspecified address is refused when it is followed."""
    url, port, state = target
    http = GuardedHttp(
        guard=AddressGuard(allow_private=True, resolver=RESOLVER), policy=RetryPolicy(attempts=1)
    )
    try:
        with pytest.raises(TargetRefused):
            await http.request(
                HttpRequest(method="POST", url=f"{url}/bounce?to={hop.format(port=port)}"),
                allow_private=False,
            )
    finally:
        await http.aclose()
    assert state.count("bounce") == 1
    assert state.count("received") == 0


async def test_a_provider_redirect_is_not_followed(target: tuple[str, int, SandboxState]) -> None:
    """Provider clients never follow redirects: a 3xx is a permanent failure, and the
    credential is not carried anywhere else."""
    url, port, state = target
    http = ProviderHttp(
        provider="sms",
        base_url=url,
        headers={"Authorization": "Bearer key"},
        policy=RetryPolicy(attempts=1),
        guard=AddressGuard(allow_private=True, resolver=RESOLVER),
    )
    try:
        with pytest.raises(PermanentError):
            await http.send("POST", f"/bounce?to=http://127.0.0.1:{port}/stolen")
    finally:
        await http.aclose()
    assert state.count("bounce") == 1
    assert state.count("received") == 0


async def test_the_operator_setting_lets_loopback_through_pinned(
    target: tuple[str, int, SandboxState],
) -> None:
    """With ``OUTBOUND_ALLOW_PRIVATE`` a name resolving to loopback is reached — at the address
    the guard resolved (``.test`` names do not exist in DNS)."""
    _url, port, state = target
    http = ProviderHttp(
        provider="sms",
        base_url=f"http://inside.rebind.test:{port}",
        headers={"Authorization": "Bearer key"},
        policy=RetryPolicy(attempts=1),
        guard=AddressGuard(allow_private=True, resolver=RESOLVER),
    )
    try:
        response = await http.send("POST", "/messages", json={"to": "+1"})
    finally:
        await http.aclose()
    assert response.json()["authorization"] == "Bearer key"
    assert state.count("received") == 1


async def test_names_that_do_not_resolve_yet_are_accepted_at_configuration() -> None:
    guard = AddressGuard(resolver=StaticResolver({}))
    await guard.check_url("https://api.provider.example/v1", provider="sms")


@pytest.mark.parametrize("url", ["ftp://example.com/", "http:///nohost", "file:///etc/passwd"])
async def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(PermanentError) as info:
        await AddressGuard().check_url(url, provider="sms")
    assert info.value.code == "invalid_url"


async def test_the_ad_rules_schedule_is_one_instance_of_the_retry_policy() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        raise TransientError("busy", provider="meta", retry_after=1.5 if calls == 2 else None)

    policy = RetryPolicy(schedule=AD_RULES_SCHEDULE, sleep=sleep)
    log = RetryLog()
    with pytest.raises(TransientError):
        await policy.run(flaky, log=log)
    assert (calls, waits, log.attempts) == (3, [1.0, 2.0], 3)

    calls, waits[:] = 0, []
    with pytest.raises(TransientError):
        await RetryPolicy(schedule=(1.0, 1.0), sleep=sleep).run(flaky)
    assert waits == [1.0, 1.5]  # the provider's longer wait wins over the schedule's


async def test_a_long_retry_after_is_not_slept() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def throttled() -> None:
        raise TransientError("throttled", provider="meta", retry_after=600)

    with pytest.raises(TransientError) as info:
        await RetryPolicy(schedule=AD_RULES_SCHEDULE, max_wait_seconds=60, sleep=sleep).run(
            throttled
        )
    assert waits == []
    assert info.value.retry_after == 600
