"""How the SERP client fails: each provider code classified transient or permanent, the retry
schedule on an injected sleep, no re-post of a task_post whose answer was lost, garbage and timeouts
turned into ProviderError, and credentials kept out of logs and errors (spec §12)."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.integrations.serp import (
    AuthenticationFailed,
    InvalidRequest,
    PaymentRequired,
    ProviderError,
    RateLimited,
    SerpClient,
    SerpTask,
    TransientProviderError,
    is_transient,
    task_state,
)
from app.sandbox.base import free_port, simulator_in_loop
from app.sandbox.serp import SerpSimulator
from tests.harness.sleep import RecordingSleep

LOGIN = "acct-login"
PASSWORD = "Hunter2-very-secret"


@dataclass
class Setup:
    sim: SerpSimulator
    url: str
    sleeps: RecordingSleep

    def client(self, **kwargs: Any) -> SerpClient:
        kwargs.setdefault("sleep", self.sleeps)
        kwargs.setdefault("timeout_seconds", 5.0)
        password = kwargs.pop("password", PASSWORD)
        return SerpClient(self.url, LOGIN, password, **kwargs)


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    sim = SerpSimulator(seed=1, login=LOGIN, password=PASSWORD)
    async with simulator_in_loop(sim) as url:
        yield Setup(sim, url, RecordingSleep())


def task(tag: str = "run-1", keyword: str = "blue widgets") -> SerpTask:
    return SerpTask(tag=tag, keyword=keyword, location_code=2840, language_code="en", depth=10)


def test_task_states_and_transient_codes() -> None:
    """§12: 20000 ok, 40601/40602 in queue (poll again), 40102 no results, anything else an error;
    40202 and 5xxxx are transient, 40200 and 40501 are not."""
    assert task_state(20000) == "ok"
    assert task_state(40601) == "in_queue"
    assert task_state(40602) == "in_queue"
    assert task_state(40102) == "no_results"
    assert task_state(50000) == "error"
    assert task_state(40501) == "error"
    assert is_transient(40202)
    assert is_transient(50000)
    assert is_transient(50301)
    assert not is_transient(40200)
    assert not is_transient(40501)
    assert not is_transient(40102)


@pytest.mark.parametrize(
    ("fault", "error_type", "transient", "status_code", "http_status"),
    [
        ({"code": 40202}, RateLimited, True, 40202, 200),
        ({"code": 50000}, TransientProviderError, True, 50000, 200),
        ({"code": 40200}, PaymentRequired, False, 40200, 200),
        ({"code": 40501}, InvalidRequest, False, 40501, 200),
        ({"status": 500, "raw": b"Internal Server Error"}, TransientProviderError, True, None, 500),
        ({"status": 502}, TransientProviderError, True, None, 502),
        ({"status": 429, "raw": b""}, RateLimited, True, None, 429),
        ({"status": 404, "raw": b"not here"}, ProviderError, False, None, 404),
    ],
)
async def test_each_error_is_classified(
    setup: Setup,
    fault: dict[str, Any],
    error_type: type[ProviderError],
    transient: bool,
    status_code: int | None,
    http_status: int,
) -> None:
    """§12: transient (5xx, 40202, 50000) vs permanent (40200, 40501, other 4xx)."""
    if "code" in fault:
        setup.sim.inject_status("serp.tasks_ready", fault["code"])
    else:
        setup.sim.state.inject("serp.tasks_ready", **fault)
    client = setup.client(retries=0)
    with pytest.raises(ProviderError) as caught:
        await client.serp_tasks_ready()
    await client.aclose()
    assert type(caught.value) is error_type
    assert caught.value.transient is transient
    assert caught.value.status_code == status_code
    assert caught.value.http_status == http_status
    assert "tasks_ready" in str(caught.value)


async def test_transient_errors_are_retried_on_the_backoff_schedule(setup: Setup) -> None:
    """Retry n waits backoff × 2ⁿ on the injected sleep; success after three rate limits."""
    setup.sim.inject_status("serp.tasks_ready", 40202, times=3)
    client = setup.client(retries=3, backoff_seconds=1.0)
    assert await client.serp_tasks_ready() == []
    await client.aclose()
    assert setup.sleeps.waits == [1.0, 2.0, 4.0]
    assert setup.sim.state.count("serp.tasks_ready") == 4


async def test_retries_exhausted_raise_the_transient_error(setup: Setup) -> None:
    setup.sim.inject_status("serp.task_get", 50000, times=-1)
    client = setup.client(retries=3, backoff_seconds=1.0)
    with pytest.raises(TransientProviderError) as caught:
        await client.get_serp_task("some-task")
    await client.aclose()
    assert caught.value.status_code == 50000
    assert setup.sleeps.waits == [1.0, 2.0, 4.0]
    assert setup.sim.state.count("serp.task_get") == 4


async def test_backoff_is_capped(setup: Setup) -> None:
    setup.sim.state.inject("serp.tasks_ready", status=503, times=5)
    client = setup.client(retries=5, backoff_seconds=10.0, max_backoff_seconds=30.0)
    assert await client.serp_tasks_ready() == []
    await client.aclose()
    assert setup.sleeps.waits == [10.0, 20.0, 30.0, 30.0, 30.0]


async def test_retry_after_is_honoured(setup: Setup) -> None:
    setup.sim.state.inject("serp.tasks_ready", status=429, headers={"Retry-After": "7"}, raw=b"")
    client = setup.client(retries=2, backoff_seconds=1.0)
    assert await client.serp_tasks_ready() == []
    await client.aclose()
    assert setup.sleeps.waits == [7.0]


async def test_permanent_errors_are_not_retried(setup: Setup) -> None:
    setup.sim.inject_status("serp.task_post", 40200, times=-1)
    client = setup.client(retries=3)
    with pytest.raises(PaymentRequired):
        await client.post_serp_tasks([task()])
    await client.aclose()
    assert setup.sleeps.waits == []
    assert setup.sim.state.count("serp.task_post") == 1
    assert setup.sim.tasks_posted == 0


async def test_a_refused_task_post_is_sent_again(setup: Setup) -> None:
    """A rate-limited task_post created nothing, so retrying it cannot duplicate tasks."""
    setup.sim.inject_status("serp.task_post", 40202)
    client = setup.client(retries=3)
    [posted] = await client.post_serp_tasks([task()])
    await client.aclose()
    assert posted.created
    assert setup.sleeps.waits == [1.0]
    assert setup.sim.state.count("serp.task_post") == 2
    assert setup.sim.tasks_posted == 1


async def test_a_task_post_whose_answer_was_lost_is_not_sent_again(setup: Setup) -> None:
    """A timed-out task_post may have created (and billed) the tasks: raised at once, flagged."""
    setup.sim.state.inject("serp.task_post", delay_seconds=3.0)
    client = setup.client(retries=3, timeout_seconds=1.0)
    with pytest.raises(TransientProviderError) as caught:
        await client.post_serp_tasks([task()])
    await client.aclose()
    assert caught.value.may_have_succeeded
    assert caught.value.http_status is None
    assert setup.sleeps.waits == []
    assert setup.sim.state.count("serp.task_post") == 1


@pytest.mark.parametrize(("status", "ambiguous"), [(504, True), (502, True), (503, False)])
async def test_a_task_post_behind_a_failing_gateway(
    setup: Setup, status: int, ambiguous: bool
) -> None:
    """A 502/504 from a gateway may hide a created task: not re-posted; a 503 created nothing."""
    setup.sim.state.inject("serp.task_post", status=status, raw=b"<html>gateway</html>")
    client = setup.client(retries=3)
    if ambiguous:
        with pytest.raises(TransientProviderError) as caught:
            await client.post_serp_tasks([task()])
        assert caught.value.may_have_succeeded
        assert setup.sim.state.count("serp.task_post") == 1
    else:
        [posted] = await client.post_serp_tasks([task()])
        assert posted.created
        assert setup.sleeps.waits == [1.0]
    await client.aclose()


async def test_a_timed_out_read_is_retried_then_raised(setup: Setup) -> None:
    """A timeout is a ProviderError (transient), retried for reads."""
    setup.sim.state.inject("serp.tasks_ready", delay_seconds=3.0, times=2)
    client = setup.client(retries=1, timeout_seconds=1.0)
    with pytest.raises(TransientProviderError) as caught:
        await client.serp_tasks_ready()
    await client.aclose()
    assert not caught.value.may_have_succeeded
    assert "ReadTimeout" in str(caught.value)
    assert setup.sleeps.waits == [1.0]
    assert setup.sim.state.count("serp.tasks_ready") == 2


async def test_an_unreachable_provider_is_transient_and_posts_are_retried() -> None:
    """Nothing listening: the request never left, so even task_post is safe to retry."""
    sleeps = RecordingSleep()
    client = SerpClient(f"http://127.0.0.1:{free_port()}", LOGIN, PASSWORD, retries=2, sleep=sleeps)
    with pytest.raises(TransientProviderError) as caught:
        await client.post_serp_tasks([task()])
    await client.aclose()
    assert not caught.value.may_have_succeeded
    assert sleeps.waits == [1.0, 2.0]


@pytest.mark.parametrize(
    "raw",
    [
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"status_code": 20000, "tasks": [',
        b"[1, 2, 3]",
        b'{"status_code": 20000, "tasks": [{"id": "t", "status_code": 20000, '
        b'"result": [{"items": [{"type": "organic", "rank_group": "first"}]}]}]}',
        b'{"status_code": 20000, "tasks": []}',
        b'{"status_code": "ok"}',
    ],
)
async def test_garbage_answers_become_a_provider_error(setup: Setup, raw: bytes) -> None:
    """An undecodable or wrongly shaped 200 answer is a clear, permanent ProviderError."""
    setup.sim.state.inject("serp.task_get", status=200, raw=raw)
    client = setup.client(retries=3)
    with pytest.raises(ProviderError) as caught:
        await client.get_serp_task("t")
    await client.aclose()
    assert not caught.value.transient
    assert "task_get" in str(caught.value)
    assert setup.sleeps.waits == []


async def test_rejected_credentials(setup: Setup) -> None:
    client = setup.client(password="wrong-password")
    with pytest.raises(AuthenticationFailed) as caught:
        await client.serp_tasks_ready()
    await client.aclose()
    assert caught.value.http_status == 401
    assert caught.value.status_code == 40100
    assert setup.sleeps.waits == []


async def test_too_many_tasks_in_one_post_is_refused_by_the_provider(setup: Setup) -> None:
    """The simulator enforces the 100-task limit that the client's chunking respects."""
    body = [{"keyword": f"k{n}", "location_code": 2840, "language_code": "en"} for n in range(101)]
    async with httpx.AsyncClient(auth=(LOGIN, PASSWORD)) as http:
        response = await http.post(f"{setup.url}/v3/serp/google/organic/task_post", json=body)
    assert response.status_code == 200
    assert response.json()["status_code"] == 40006
    assert setup.sim.tasks_posted == 0


async def test_credentials_never_reach_logs_or_errors(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """Every path that logs or raises — success, retries, a lost post, rejected credentials —
    leaves neither the password nor the basic-auth token in the logs or the messages."""
    caplog.set_level(logging.DEBUG)
    token = base64.b64encode(f"{LOGIN}:{PASSWORD}".encode()).decode()
    messages: list[str] = []
    client = setup.client(retries=1)
    impatient = setup.client(retries=1, timeout_seconds=1.0)

    await client.post_serp_tasks([task()])
    setup.sim.inject_status("serp.tasks_ready", 50000, times=-1)
    with pytest.raises(ProviderError) as retried:
        await client.serp_tasks_ready()
    messages.append(str(retried.value))
    setup.sim.state.clear_faults()
    setup.sim.state.inject("serp.task_post", delay_seconds=3.0)
    with pytest.raises(ProviderError) as lost:
        await impatient.post_serp_tasks([task()])
    messages.append(str(lost.value))
    wrong = setup.client(password=PASSWORD + "x")
    with pytest.raises(ProviderError) as rejected:
        await wrong.serp_tasks_ready()
    messages.append(str(rejected.value))
    for each in (client, impatient, wrong):
        await each.aclose()

    assert "retry 1/1" in caplog.text  # the retry was logged…
    assert "task_post" in caplog.text
    assert "ReadTimeout" in messages[1]
    for text in [caplog.text, *messages, repr(client)]:
        assert PASSWORD not in text  # …without the password
        assert token not in text
