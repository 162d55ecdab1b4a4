"""The ``http_request`` client (spec §9: SSRF protection, timeout, response size limit).

Refusals are checked without any server: a refused target must fail before a connection is
attempted. Allowed targets are a real HTTP server on loopback, reached because the workspace allows
private targets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from ipaddress import ip_address

import pytest
from litestar import Litestar, Request, get, post
from litestar.response import Redirect, Response, Stream

from app.integrations.http_guard import (
    GuardedHttp,
    HttpRequest,
    PermanentError,
    ResponseTooLarge,
    RetryPolicy,
    StaticResolver,
    TargetRefused,
    TransientError,
    refusal_reason,
)
from app.integrations.http_guard.addresses import IPAddress
from app.integrations.http_guard.retry import backoff_delay, retry_after_seconds
from app.sandbox.base import SandboxState, serve_in_loop
from tests.harness.sleep import RecordingSleep


def echo_app(state: SandboxState, release_slow: asyncio.Event) -> Litestar:
    @post(["/echo", "/echo/{rest:path}"], status_code=200)
    async def echo_post(request: Request) -> dict[str, object]:
        state.hit("echo")
        return {
            "method": request.method,
            "host": request.headers.get("host"),
            "idempotency_key": request.headers.get("idempotency-key"),
            "authorization": request.headers.get("authorization"),
            "body": (await request.body()).decode(),
        }

    @get("/echo")
    async def echo_get(request: Request) -> dict[str, object]:
        state.hit("echo")
        return {
            "method": request.method,
            "host": request.headers.get("host"),
            "authorization": request.headers.get("authorization"),
        }

    @get("/big")
    async def big() -> Response[bytes]:
        state.hit("big")
        return Response(b"x" * 5000, media_type="text/plain")

    @get("/drip")
    async def drip() -> Stream:
        state.hit("drip")

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(50):
                yield b"y" * 100

        return Stream(chunks(), media_type="text/plain")

    @get("/slow")
    async def slow() -> dict[str, str]:
        state.hit("slow")
        # Slow far past the client's timeout: it answers only once the test has seen the client
        # give up (or after 5 s, so a client without a timeout gets an answer and the test fails
        # instead of hanging). Released, it doesn't hold the server's shutdown for its grace period.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release_slow.wait(), 5)
        return {"late": "yes"}

    @get("/flaky")
    async def flaky() -> Response[dict[str, str]]:
        if state.hit("flaky") is not None:
            return Response({"error": "busy"}, status_code=503, headers={"Retry-After": "2"})
        return Response({"ok": "yes"})

    @get("/missing")
    async def missing() -> Response[dict[str, str]]:
        state.hit("missing")
        return Response({"error": "no such thing"}, status_code=404)

    @post("/moved", status_code=200)
    async def moved(request: Request) -> Redirect:
        state.hit("moved")
        return Redirect(request.query_params.get("to", "/echo"), status_code=303)

    return Litestar([echo_post, echo_get, big, drip, slow, flaky, missing, moved])


@pytest.fixture(scope="module")
def release_slow() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture(scope="module")
async def server(release_slow: asyncio.Event) -> AsyncIterator[tuple[str, SandboxState]]:
    state = SandboxState()
    async with serve_in_loop(echo_app(state, release_slow)) as url:
        yield url, state


@pytest.fixture
def target(server: tuple[str, SandboxState]) -> tuple[str, SandboxState]:
    url, state = server
    state.reset_counts()
    state.clear_faults()
    return url, state


@pytest.fixture
async def guard() -> AsyncIterator[GuardedHttp]:
    http = GuardedHttp(timeout=2.0, policy=RetryPolicy(attempts=1))
    yield http
    await http.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:8080/",
        "http://192.168.1.20/",
        "https://[fe80::1]/",
    ],
)
async def test_private_literal_targets_are_refused(guard: GuardedHttp, url: str) -> None:
    """spec §9 http_request: loopback, private, link-local, unspecified targets are refused."""
    with pytest.raises(TargetRefused) as info:
        await guard.request(HttpRequest(method="GET", url=url), allow_private=False)
    assert info.value.code == "target_refused"
    assert not info.value.transient


@pytest.mark.parametrize("answer", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1"])
async def test_a_name_resolving_to_a_private_address_is_refused(answer: str) -> None:
    """spec §9: the check applies to what a host name resolves to, not only to literals."""
    resolver = StaticResolver({"innocent.example.com": [answer]})
    http = GuardedHttp(resolver=resolver, policy=RetryPolicy(attempts=1))
    try:
        with pytest.raises(TargetRefused, match=r"innocent\.example\.com resolves to"):
            await http.request(
                HttpRequest(method="POST", url="https://innocent.example.com/hook", body="{}"),
                allow_private=False,
            )
    finally:
        await http.aclose()


async def test_a_name_with_one_private_address_among_public_ones_is_refused() -> None:
    resolver = StaticResolver({"mixed.example.com": ["93.184.216.34", "10.1.2.3"]})
    http = GuardedHttp(resolver=resolver, policy=RetryPolicy(attempts=1))
    try:
        with pytest.raises(TargetRefused):
            await http.request(
                HttpRequest(method="GET", url="http://mixed.example.com/"), allow_private=False
            )
    finally:
        await http.aclose()


async def test_localhost_is_refused_through_the_system_resolver(
    guard: GuardedHttp, target: tuple[str, SandboxState]
) -> None:
    url, state = target
    port = url.rsplit(":", 1)[1]
    with pytest.raises(TargetRefused, match="loopback"):
        await guard.request(
            HttpRequest(method="GET", url=f"http://localhost:{port}/echo"), allow_private=False
        )
    assert state.count() == 0


async def test_private_targets_are_reached_when_the_workspace_allows_them(
    guard: GuardedHttp, target: tuple[str, SandboxState]
) -> None:
    url, state = target
    port = url.rsplit(":", 1)[1]
    result = await guard.request(
        HttpRequest(
            method="POST",
            url=f"http://localhost:{port}/echo",
            headers={"Content-Type": "application/json", "X-Custom": "1"},
            body='{"name": "Ada"}',
        ),
        allow_private=True,
        idempotency_key="effect-42",
    )
    assert result.status == 200
    assert result.data["body"] == '{"name": "Ada"}'
    assert result.data["idempotency_key"] == "effect-42"
    assert result.data["host"] == f"localhost:{port}"
    assert state.count("echo") == 1


class CountingResolver:
    """Answers loopback the first time and a public address afterwards: a rebinding name."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.calls += 1
        return [ip_address("127.0.0.1") if self.calls == 1 else ip_address("203.0.113.9")]


async def test_the_connection_goes_to_the_address_that_was_checked(
    target: tuple[str, SandboxState],
) -> None:
    """DNS rebinding: the name is resolved once per hop and the request connects to that answer
    (``.test`` names do not exist in DNS, so the request could only have reached the pinned IP)."""
    url, _state = target
    port = url.rsplit(":", 1)[1]
    resolver = CountingResolver()
    http = GuardedHttp(resolver=resolver, policy=RetryPolicy(attempts=1))
    try:
        result = await http.request(
            HttpRequest(method="GET", url=f"http://hooks.rebind.test:{port}/echo"),
            allow_private=True,
        )
    finally:
        await http.aclose()
    assert result.status == 200
    assert result.data["host"] == f"hooks.rebind.test:{port}"
    assert resolver.calls == 1


async def test_redirects_are_followed_and_checked_again(
    guard: GuardedHttp, target: tuple[str, SandboxState]
) -> None:
    url, state = target
    result = await guard.request(
        HttpRequest(method="POST", url=f"{url}/moved?to=/echo", body="x"), allow_private=True
    )
    assert result.status == 200
    assert result.data["method"] == "GET"
    assert result.url == f"{url}/echo"

    with pytest.raises(TargetRefused, match="unspecified"):
        await guard.request(
            HttpRequest(
                method="POST", url=f"{url}/moved?to=http://0.0.0.0:{url.rsplit(':', 1)[1]}/echo"
            ),
            allow_private=True,
        )
    assert state.count("moved") == 2


async def test_the_response_size_limit_is_enforced(target: tuple[str, SandboxState]) -> None:
    url, _state = target
    http = GuardedHttp(max_response_bytes=1000, policy=RetryPolicy(attempts=1))
    try:
        with pytest.raises(ResponseTooLarge):
            await http.request(HttpRequest(method="GET", url=f"{url}/big"), allow_private=True)
        # A streamed body announces no length: the limit holds while reading.
        with pytest.raises(ResponseTooLarge):
            await http.request(HttpRequest(method="GET", url=f"{url}/drip"), allow_private=True)
        small = await http.request(HttpRequest(method="GET", url=f"{url}/echo"), allow_private=True)
        assert small.status == 200
    finally:
        await http.aclose()


async def test_the_timeout_is_enforced(
    target: tuple[str, SandboxState], release_slow: asyncio.Event
) -> None:
    url, state = target
    release_slow.clear()
    http = GuardedHttp(timeout=0.3, policy=RetryPolicy(attempts=1))
    try:
        with pytest.raises(TransientError) as info:
            await http.request(HttpRequest(method="GET", url=f"{url}/slow"), allow_private=True)
    finally:
        release_slow.set()
        await http.aclose()
    assert info.value.code == "timeout"
    assert state.count("slow") == 1


async def test_transient_failures_are_retried_after_retry_after(
    target: tuple[str, SandboxState],
) -> None:
    url, state = target
    state.inject("flaky", times=1)
    sleeps = RecordingSleep()
    http = GuardedHttp(policy=RetryPolicy(attempts=3, sleep=sleeps))
    try:
        result = await http.request(
            HttpRequest(method="GET", url=f"{url}/flaky"), allow_private=True
        )
    finally:
        await http.aclose()
    assert result.data == {"ok": "yes"}
    assert state.count("flaky") == 2
    assert sleeps.waits == [2.0]


async def test_client_errors_are_permanent_and_not_retried(
    target: tuple[str, SandboxState],
) -> None:
    url, state = target
    sleeps = RecordingSleep()
    http = GuardedHttp(policy=RetryPolicy(attempts=3, sleep=sleeps))
    try:
        with pytest.raises(PermanentError) as info:
            await http.request(HttpRequest(method="GET", url=f"{url}/missing"), allow_private=True)
    finally:
        await http.aclose()
    assert info.value.status == 404
    assert state.count("missing") == 1
    assert sleeps.waits == []


@pytest.mark.parametrize(
    ("method", "url"),
    [("GET", "file:///etc/passwd"), ("GET", "gopher://example.com/"), ("TRACE", "http://a.b/")],
)
async def test_unsupported_schemes_and_methods_are_permanent(
    guard: GuardedHttp, method: str, url: str
) -> None:
    with pytest.raises(PermanentError):
        await guard.request(HttpRequest(method=method, url=url), allow_private=True)


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
        ("127.0.0.2", True),
        ("10.255.0.1", True),
        ("172.16.0.1", True),
        ("100.64.0.1", True),
        ("169.254.169.254", True),
        ("224.0.0.1", True),
        ("0.0.0.0", True),
        ("::", True),
        ("::1", True),
        ("fe80::1", True),
        ("fd00::1", True),
        ("ff02::1", True),
        ("::ffff:10.0.0.1", True),
        ("64:ff9b::a9fe:a9fe", True),
        ("2002:7f00:1::", True),
    ],
)
def test_refusal_reason(address: str, refused: bool) -> None:
    assert (refusal_reason(ip_address(address)) is not None) is refused


def test_allowing_private_targets_never_allows_unspecified_or_multicast() -> None:
    assert refusal_reason(ip_address("10.0.0.1"), allow_private=True) is None
    assert refusal_reason(ip_address("::1"), allow_private=True) is None
    assert refusal_reason(ip_address("0.0.0.0"), allow_private=True) is not None
    assert refusal_reason(ip_address("ff02::1"), allow_private=True) is not None


NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("-3", 0.0),
        ("Mon, 02 Mar 2026 09:00:30 GMT", 30.0),
        ("Mon, 02 Mar 2026 08:00:00 GMT", 0.0),
        ("soon", None),
    ],
)
def test_retry_after_reads_seconds_and_dates(header: str, seconds: float | None) -> None:
    assert retry_after_seconds({"retry-after": header}, NOW) == seconds


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(backoff_seconds=1.0, max_backoff_seconds=4.0)
    assert 0.5 <= backoff_delay(policy, 1, None) <= 1.0
    assert 1.0 <= backoff_delay(policy, 2, None) <= 2.0
    assert 2.0 <= backoff_delay(policy, 10, None) <= 4.0
    assert backoff_delay(policy, 1, 12.0) == 12.0
