"""The one transient/permanent classifier of outbound failures
(:mod:`app.integrations.http_guard.classify`): what it says of statuses, network failures and SMTP
replies, that ``Retry-After`` is honoured, and that no other module classifies statuses itself."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from app.integrations.http_guard import (
    NOT_SENT,
    ProviderHttp,
    RetryPolicy,
    TransientError,
    classify_exception,
    is_transient_smtp_reply,
    is_transient_status,
)
from app.integrations.http_guard.classify import TIMEOUT, TRANSIENT_4XX, UNSENDABLE
from app.integrations.http_guard.retry import retry_after_seconds

pytestmark = pytest.mark.usefixtures("collector_paused")

APP = Path(__file__).resolve().parents[2] / "app"
CLASSIFIER = APP / "integrations" / "http_guard" / "classify.py"
ALLOWED_TREES = {
    APP / "web": "the product's own HTTP answers (error pages, access logs, request spans), not "
    "an outside API's",
    APP / "sandbox": "the simulators stand for the outside world and choose statuses to answer",
}
CLASSIFYING_EXCEPTIONS = frozenset(
    {
        "TimeoutException",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "LocalProtocolError",
        "RemoteProtocolError",
        "UnsupportedProtocol",
        "NetworkError",
    }
)
"""``httpx`` failures whose meaning for a retry only the classifier decides."""


# --- behaviour -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
def test_not_now_statuses_are_transient(status: int) -> None:
    assert is_transient_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 413, 422, 451])
def test_refusals_are_permanent(status: int) -> None:
    assert not is_transient_status(status)


@pytest.mark.parametrize(
    ("exc", "transient", "code"),
    [
        (httpx.ConnectError("refused"), True, NOT_SENT),
        (httpx.ConnectTimeout("slow handshake"), True, NOT_SENT),
        (httpx.PoolTimeout("no free connection"), True, NOT_SENT),
        (httpx.ReadTimeout("no answer"), True, TIMEOUT),
        (httpx.WriteTimeout("stuck"), True, TIMEOUT),
        (httpx.RemoteProtocolError("peer hung up"), True, "network"),
        (httpx.ReadError("reset"), True, "network"),
        (httpx.LocalProtocolError("bad header"), False, UNSENDABLE),
        (httpx.UnsupportedProtocol("gopher://"), False, UNSENDABLE),
    ],
)
def test_network_failures_are_classified(exc: httpx.HTTPError, transient: bool, code: str) -> None:
    failure = classify_exception(exc)
    assert (failure.transient, failure.code) == (transient, code)
    assert type(exc).__name__ in failure.reason


@pytest.mark.parametrize(
    ("code", "transient"), [(421, True), (451, True), (550, False), (554, False)]
)
def test_smtp_replies_are_classified(code: int, transient: bool) -> None:
    assert is_transient_smtp_reply(code) is transient


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds({"retry-after": "7"}, now) == 7.0
    assert retry_after_seconds({"retry-after": "Sun, 01 Mar 2026 12:00:30 GMT"}, now) == 30.0
    assert retry_after_seconds({"retry-after": "soon"}, now) is None
    assert retry_after_seconds({}, now) is None


async def test_a_provider_client_retries_a_429_after_its_retry_after() -> None:
    """The classifier's verdict drives the one retry loop; the provider's wait is honoured."""
    answers = iter([httpx.Response(429, headers={"Retry-After": "3"}), httpx.Response(200)])
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    http = ProviderHttp(
        provider="demo",
        base_url="https://api.example",
        policy=RetryPolicy(attempts=2, backoff_seconds=0.01, sleep=sleep),
        transport=httpx.MockTransport(lambda request: next(answers)),
    )
    response = await http.send("GET", "/thing")
    await http.aclose()
    assert response.status_code == 200
    assert waits == [3.0]


async def test_a_provider_client_does_not_retry_a_422() -> None:
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(422, json={"message": "bad field"})

    http = ProviderHttp(
        provider="demo", base_url="https://api.example", transport=httpx.MockTransport(answer)
    )
    with pytest.raises(Exception) as info:
        await http.send("GET", "/thing")
    await http.aclose()
    assert not isinstance(info.value, TransientError)
    assert len(calls) == 1


# --- one home --------------------------------------------------------------------------------


def _classifying_constants(node: ast.AST) -> list[int]:
    """Status constants of a "transient or not" decision: 5xx and the transient 4xx."""
    found = []
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Constant)
            and type(sub.value) is int
            and (sub.value in TRANSIENT_4XX or 500 <= sub.value < 600)
        ):
            found.append(sub.value)
    return found


def _about_a_status(node: ast.Compare) -> bool:
    """Whether the comparison reads a status or a reply code (``status``, ``exc.status``,
    ``response.status_code``, an SMTP ``code``) rather than, say, a length."""
    for sub in ast.walk(node):
        name = sub.id if isinstance(sub, ast.Name) else getattr(sub, "attr", None)
        if isinstance(name, str) and ("status" in name.lower() or "code" in name.lower()):
            return True
    return False


def _offences(path: Path) -> list[tuple[int, str]]:
    """Lines of ``path`` that decide "transient or not" themselves, with what they do."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and _about_a_status(node) and _classifying_constants(node):
            found.append((node.lineno, "compares a status"))
        if (
            isinstance(node, ast.Attribute)
            and node.attr in CLASSIFYING_EXCEPTIONS
            and isinstance(node.value, ast.Name)
            and node.value.id == "httpx"
        ):
            found.append((node.lineno, f"names httpx.{node.attr}"))
    return sorted(found)


def _allowed(path: Path) -> bool:
    return path == CLASSIFIER or any(path.is_relative_to(tree) for tree in ALLOWED_TREES)


def test_no_module_but_the_classifier_classifies_statuses_or_failures() -> None:
    offenders = [
        f"{path.relative_to(APP.parent)}:{line} {what}"
        for path in sorted(APP.rglob("*.py"))
        if not _allowed(path)
        for line, what in _offences(path)
    ]
    assert not offenders, f"ask app.integrations.http_guard.classify instead: {offenders}"


def test_the_check_finds_a_module_that_classifies(tmp_path: Path) -> None:
    """The check itself: each spelling of a home-made classification is found, a status that
    decides nothing about retrying (a 401, a 200) is not."""
    module = tmp_path / "rogue.py"
    module.write_text(
        "import httpx\n"
        "a = status >= 500\n"
        "b = response.status_code in (429, 503)\n"
        "c = status == 408\n"
        "try:\n    pass\nexcept httpx.ReadTimeout:\n    pass\n"
        "d = status == 401\n"
        "e = status != 200\n"
    )
    assert [line for line, _ in _offences(module)] == [2, 3, 4, 7]
    assert _offences(CLASSIFIER), "the classifier itself is where the comparisons live"
