"""The harness the provider-client tests share (push, SMS, letter, payments, booking, AI): one
simulator served per test module, reset to its configuration before each test, and a client
pointed at it whose retries wait on a :class:`RecordingSleep`.

A module names its simulator and how its client is built; the rest is here::

    served, sms = provider_fixtures(fresh_sandbox, new_client)

(pytest names a fixture by the module attribute it is found under; the first must be ``served``,
the name the second asks for). A module whose tests need more than that (slots booked, a client of
another shape) takes ``served = served_fixture(fresh_sandbox)`` alone and writes its per-test
fixture with :func:`provider_setup`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import pytest

from app.integrations.http_guard import RetryPolicy
from app.sandbox.base import HttpSimulator, simulator_in_loop
from tests.harness.sleep import RecordingSleep

# Generous for a provider that answers: a loaded machine is slow to serve even loopback.
ANSWER_TIMEOUT = 1.0
# For a provider holding its answer for 3 s: any timeout well under that shows the client
# giving up, and a short one spares the test a second of waiting per attempt; not so short that a
# busy machine cannot connect and send within it (0.2 s was, now and then).
SILENCE_TIMEOUT = 0.5


class Closable(Protocol):
    async def aclose(self) -> None: ...


SandboxT = TypeVar("SandboxT", bound=HttpSimulator)
ClientT = TypeVar("ClientT", bound=Closable)

# A module's simulator and the base URL it is served at.
Served = tuple[SandboxT, str]


def quick_retries(sleep: RecordingSleep) -> RetryPolicy:
    """Three attempts, waits recorded rather than slept: a retry is seen in ``sleep.waits``."""
    return RetryPolicy(attempts=3, backoff_seconds=0.01, sleep=sleep)


@dataclass
class ProviderSetup(Generic[SandboxT, ClientT]):
    """One test's simulator (fresh), its URL, the client talking to it and the client's sleep."""

    sandbox: SandboxT
    url: str
    client: ClientT
    sleeps: RecordingSleep


@asynccontextmanager
async def serve(sandbox: SandboxT) -> AsyncIterator[Served[SandboxT]]:
    """Serve ``sandbox`` in the running loop for as long as the block lasts (one per module)."""
    async with simulator_in_loop(sandbox) as url:
        yield sandbox, url


@asynccontextmanager
async def provider_setup(
    served: Served[SandboxT], new_client: Callable[[str, RecordingSleep], ClientT]
) -> AsyncIterator[ProviderSetup[SandboxT, ClientT]]:
    """The served simulator reset to a fresh one and a new client on it, closed afterwards."""
    sandbox, url = served
    sandbox.reset()
    sleeps = RecordingSleep()
    client = new_client(url, sleeps)
    try:
        yield ProviderSetup(sandbox, url, client, sleeps)
    finally:
        await client.aclose()


def served_fixture(fresh_sandbox: Callable[[], SandboxT]) -> Any:
    """A module's ``served`` fixture: the simulator ``fresh_sandbox`` builds, served once."""

    @pytest.fixture(scope="module")
    async def served() -> AsyncIterator[Served[SandboxT]]:
        async with serve(fresh_sandbox()) as running:
            yield running

    return served


def provider_fixtures(
    fresh_sandbox: Callable[[], SandboxT],
    new_client: Callable[[str, RecordingSleep], ClientT],
) -> tuple[Any, Any]:
    """A module's two fixtures: :func:`served_fixture`, and per test a :class:`ProviderSetup`
    with the simulator reset and a new client on it."""

    @pytest.fixture
    async def setup(served: Served[SandboxT]) -> AsyncIterator[ProviderSetup[SandboxT, ClientT]]:
        async with provider_setup(served, new_client) as made:
            yield made

    return served_fixture(fresh_sandbox), setup
