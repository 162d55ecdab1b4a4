"""Fixtures of the outside-action tests: the engine with every outside channel delivering to
loopback simulators (each started once for the session when a test first needs it, and reset
before every test, so each test sees fresh counters, data and idempotency ledgers), an HTTP echo
target for ``http_request``, and helpers to configure a workspace's providers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pytest
from litestar import Litestar, Request, route
from litestar.params import FromPath

from app.clock import ManualClock
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import Send
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.channel_deps import ChannelDeps
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.outbox.work.outcomes import decisions
from app.engines.funnels.outside.channels import CHANNEL_TYPES
from app.engines.funnels.outside.clients import ProviderClients
from app.engines.funnels.outside.config import configure
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.http_guard import AddressGuard
from app.integrations.mail import MailSender, SmtpPool
from app.runtime import Runtime
from app.sandbox.ai import AiSandbox
from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    restore_defaults,
    start_simulator,
)
from app.sandbox.booking import BookingSandbox
from app.sandbox.letter import LetterSandbox
from app.sandbox.payments import PaymentsSandbox
from app.sandbox.push import PushSandbox
from app.sandbox.sms import SmsSandbox, TwilioSandbox
from app.sandbox.smtp import SmtpSink
from app.settings import FunnelSettings, MailSettings
from tests.engines.funnels.factories import Engine, Space, session_sink, sink, space

__all__ = ["session_sink", "sink", "space"]


@dataclass
class EchoTarget(HttpSimulator):
    """Any HTTP endpoint an ``http_request`` may call: answers what it received, counts calls."""

    state: SandboxState = field(default_factory=SandboxState)
    received: list[dict[str, Any]] = field(default_factory=list)

    def reset_data(self) -> None:
        restore_defaults(self, "received")

    def create_app(self) -> Litestar:
        return create_echo_app(self)


def create_echo_app(target: EchoTarget) -> Litestar:
    @route("/{path:path}", http_method=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def echo(request: Request[Any, Any, Any], path: FromPath[str]) -> Any:
        if (fault := target.state.hit("echo")) is not None:
            return await fault_response(fault)
        body = (await request.body()).decode()
        seen = {
            "method": request.method,
            "path": path,
            "body": body,
            "token": request.headers.get("x-token"),
            "idempotency_key": request.headers.get("idempotency-key"),
        }
        target.received.append(seen)
        return {"ok": True, "score": 42, **seen}

    return Litestar([echo])


S = TypeVar("S", bound=HttpSimulator)


@dataclass
class Sims:
    """The simulators started so far, by name (each on demand, once)."""

    servers: list[ThreadedServer] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)
    objects: dict[str, HttpSimulator] = field(default_factory=dict)

    def get(self, name: str, build: Callable[[], S]) -> S:
        """The simulator ``name``, started from ``build()`` the first time it is asked for."""
        if name not in self.objects:
            simulator = build()
            self.servers.append(start_simulator(simulator))
            self.urls[name] = simulator.url
            self.objects[name] = simulator
        return cast(S, self.objects[name])

    def reset(self) -> None:
        for simulator in self.objects.values():
            simulator.reset()


@pytest.fixture(scope="session")
def session_sims() -> Iterator[Sims]:
    started = Sims()
    yield started
    for server in started.servers:
        server.stop()


@pytest.fixture
def sims(session_sims: Sims) -> Sims:
    session_sims.reset()
    return session_sims


@dataclass
class Outside(Engine):
    """The engine, with the outside channels and the simulators the test started."""

    sims: Sims = field(default_factory=Sims)
    senders: dict[str, ChannelSender] = field(default_factory=dict)
    guard: AddressGuard = field(default_factory=lambda: AddressGuard(allow_private=True))
    """The operator allows private targets here, for the loopback simulators (tests of the
    refusals turn it off)."""

    async def provider(
        self,
        ws: int,
        kind: str,
        *,
        shape: str,
        secret: str | None,
        options: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> None:
        async with self.runtime.db.write() as uow:
            await configure(
                uow.session,
                self.runtime.secrets,
                self.guard,
                workspace_id=ws,
                kind=kind,
                shape=shape,
                base_url=url if url is not None else self.sims.urls[kind],
                options=options,
                secret=secret,
                now=self.clock.now(),
            )

    async def crash_after_send(self) -> int:
        """A deliverer leases every due effect, sends each, and dies before marking any; the
        lease then runs out and the engine carries on. Returns how many were sent."""
        leased = await self.deliverer.lease(owner="doomed", now=self.clock.now(), limit=100)
        async with self.runtime.db.read() as session:
            people = await gate.people(session, None, {e.contact_id for e in leased})
        said = decisions(leased, people, self.clock.now())
        for effect in leased:
            if isinstance(said[effect.id], Send):
                await self.senders[effect.channel].send(effect)
        self.clock.advance(seconds=61)
        await self.drive()
        return len(leased)

    def sms(self) -> SmsSandbox:
        return self.sims.get("sms", SmsSandbox)

    def twilio(self) -> TwilioSandbox:
        return self.sims.get("twilio", TwilioSandbox)

    def push(self) -> PushSandbox:
        return self.sims.get("push", PushSandbox)

    def letter(self) -> LetterSandbox:
        return self.sims.get("letter", LetterSandbox)

    def payments(self) -> PaymentsSandbox:
        return self.sims.get("payments", PaymentsSandbox)

    def booking(self) -> BookingSandbox:
        return self.sims.get("booking", BookingSandbox)

    def ai(self) -> AiSandbox:
        return self.sims.get("ai", AiSandbox)

    def echo(self) -> EchoTarget:
        return self.sims.get("echo", EchoTarget)


@pytest.fixture
async def outside(
    runtime: Runtime, clock: ManualClock, sink: SmtpSink, sims: Sims
) -> AsyncIterator[Outside]:
    settings = FunnelSettings(lease_seconds=60, retry_base_seconds=60, max_send_attempts=4)
    mail = MailSettings(
        smtp_host=sink.host,
        smtp_port=sink.port,
        from_address="funnels@test.example",
        timeout_seconds=5,
    )
    guard = AddressGuard(allow_private=True)
    signing = WorkspaceTracking(
        runtime.db, runtime.secrets, runtime.settings.web.public_url, runtime.clock
    )
    deps = ChannelDeps(
        db=runtime.db,
        secrets=runtime.secrets,
        clock=clock,
        mail=mail,
        guard=guard,
        clients=ProviderClients(clock, guard),
        smtp=SmtpPool(mail, 1),
        team_mail=MailSender(mail),
        tracking=signing,
    )
    senders: dict[str, ChannelSender] = {
        "email": EmailChannel(MailSender(mail), signing=signing),
        **{name: kind(deps) for name, kind in CHANNEL_TYPES.items()},
    }
    runner = Runner(runtime.db, settings, mail_domain="test.example", executors=EXECUTORS)
    deliverer = Deliverer(runtime.db, settings, senders.get, lease_seconds=60)
    yield Outside(runtime, clock, sink, runner, deliverer, sims=sims, senders=senders, guard=guard)
    await deps.clients.aclose()


__all__ += ["Outside", "Space"]
