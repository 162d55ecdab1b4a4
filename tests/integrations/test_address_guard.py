"""The address guard on every URL a user or a workspace sets (issue: SSRF through provider base
URLs): refused at configuration and at connection, in every encoding of the private, loopback,
link-local and metadata ranges, behind a name and behind a redirect; a loopback receiver records
nothing. Allowed targets are a real HTTP server on loopback, reached only when the operator
allows private targets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from ipaddress import IPv6Address, ip_address

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
from app.integrations.http_guard.addresses import embedded_ipv4, refusal_reason
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
    "http://[::127.0.0.1]:{port}/",  # IPv4-compatible IPv6
    "http://[::ffff:0:127.0.0.1]:{port}/",  # IPv4-translated IPv6
    "http://[2002:7f00:1::1]:{port}/",  # 6to4
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
    async def anything(request: Request) -> dict[str, str]:
        state.hit("received")
        return {"ok": "yes", "authorization": request.headers.get("authorization", "")}

    @get(["/", "/{rest:path}"])
    async def anything_get() -> dict[str, str]:
        state.hit("received")
        return {"ok": "yes"}

    @post("/bounce", status_code=200)
    async def bounce(request: Request) -> Redirect:
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


# Each IPv6 form that carries an IPv4 address, with a refused IPv4 address inside (and the reason's
# first words): the embedded address is judged as plain IPv4 would be.
EMBEDDED_REFUSED = [
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:0:10.1.2.3", "private"),  # IPv4-translated (RFC 2765)
    ("::127.0.0.1", "loopback"),  # IPv4-compatible (deprecated, RFC 4291)
    ("::192.168.0.1", "private"),
    ("::169.254.169.254", "cloud metadata"),
    ("64:ff9b::127.0.0.1", "loopback"),  # NAT64 well-known prefix
    ("64:ff9b::a9fe:a9fe", "cloud metadata"),
    ("64:ff9b:1::10.0.0.1", "private"),  # local-use NAT64, /96 layout
    ("64:ff9b:1:0:7f:0:100:0", "loopback"),  # local-use NAT64, /64 layout (127.0.0.1)
    ("64:ff9b:1:7f00:0:100::", "loopback"),  # local-use NAT64, /48 layout (127.0.0.1)
    ("64:ff9b:1:c0:a8:1::", "private"),  # local-use NAT64, /56 layout (192.168.0.1)
    ("2002:7f00:1::1", "loopback"),  # 6to4
    ("2002:a9fe:a9fe::", "cloud metadata"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo client 127.0.0.1, obfuscated
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"),  # Teredo client 10.0.0.1
    ("2001:0:7f00:1:8000:63bf:f7f7:f7f7", "loopback"),  # Teredo server 127.0.0.1
    ("2606:4700::5efe:127.0.0.1", "loopback"),  # ISATAP, local identifier
    ("2606:4700::200:5efe:192.168.1.1", "private"),  # ISATAP, universal identifier
    ("fe80::5efe:8.8.8.8", "link-local"),  # ISATAP on a link-local prefix: the prefix counts
]


@pytest.mark.parametrize(("address", "reason"), EMBEDDED_REFUSED)
def test_every_ipv6_form_embedding_a_refused_ipv4_address_is_refused(
    address: str, reason: str
) -> None:
    """Issue 31, item 9: ``[::127.0.0.1]`` and every other IPv6 form that embeds a private,
    loopback, link-local or metadata IPv4 address is refused, the embedded address named."""
    refused = refusal_reason(ip_address(address))
    assert refused is not None
    assert refused.startswith(reason), refused


@pytest.mark.parametrize(
    "address",
    ["::127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "::ffff:0:0.0.0.0"],
)
def test_allowing_private_targets_still_refuses_embedded_metadata_and_unspecified(
    address: str,
) -> None:
    if address == "::127.0.0.1":
        assert refusal_reason(ip_address(address), allow_private=True) is None
    else:
        assert refusal_reason(ip_address(address), allow_private=True) is not None


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:8.8.8.8",  # IPv4-mapped
        "::ffff:0:8.8.8.8",  # IPv4-translated
        "::8.8.8.8",  # IPv4-compatible
        "64:ff9b::8.8.8.8",  # NAT64 well-known prefix
        "64:ff9b:1::8.8.8.8",  # local-use NAT64, /96 layout
        "2002:808:808::1",  # 6to4
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: server 65.54.227.120, client 8.8.8.8
        "2606:4700::200:5efe:8.8.8.8",  # ISATAP on a global prefix
    ],
)
def test_an_embedded_public_ipv4_address_is_allowed(address: str) -> None:
    assert refusal_reason(ip_address(address)) is None


@pytest.mark.parametrize(
    ("address", "readings"),
    [
        ("64:ff9b:1::8.8.8.8", ["8.8.8.8"]),
        # The /64 reading, and the /96 reading of the same bits (its suffix is all of it).
        ("64:ff9b:1:0:8:808:800:0", ["8.8.8.8", "8.0.0.0"]),
        # A /48 layout is read at /48, /56, /64 and /96: its zero suffix fits them all.
        ("64:ff9b:1:7f00:0:100::", ["127.0.0.1", "0.0.1.0", "0.1.0.0", "0.0.0.0"]),
    ],
)
def test_local_use_nat64_is_read_at_every_rfc6052_position(
    address: str, readings: list[str]
) -> None:
    embedded = embedded_ipv4(IPv6Address(address))
    assert embedded is not None
    form, inner = embedded
    assert form == "local-use NAT64"
    assert sorted(str(ip) for ip in inner) == sorted(readings)


async def test_ipv4_compatible_loopback_is_refused_at_configuration() -> None:
    """The form seen passing the guard (issue 31): refused before it is stored."""
    with pytest.raises(TargetRefused) as info:
        await AddressGuard().check_url("http://[::127.0.0.1]:8080/hook", provider="webhook")
    assert "loopback" in str(info.value)
