"""Fixtures and helpers of the Funnels tests: a shared SMTP sink, contacts and published funnels,
and ``drive`` which runs the matcher, the runner and the deliverer until nothing is due."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from app.clock import ManualClock
from app.engines.funnels.contacts import erased_addresses
from app.engines.funnels.contacts.fields import define_field
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import create_funnel, parse_definition, publish
from app.engines.funnels.deps import FunnelsDeps
from app.engines.funnels.events.claim.triggers import match_events
from app.engines.funnels.events.ingest import IngestPayload, run_ingest
from app.engines.funnels.events.tracking import sign_body
from app.engines.funnels.events.work.segment_triggers import evaluate_segments
from app.engines.funnels.models import (
    Contact,
    ContactList,
    FunnelVersion,
    OutboxEffect,
    Run,
    Step,
    Tag,
)
from app.engines.funnels.outbox.channel import ChannelSender
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.email import EmailChannel
from app.engines.funnels.outbox.work.mail_tracking import WorkspaceTracking
from app.engines.funnels.plugin import EXECUTORS
from app.engines.funnels.runs.due.entry import enter
from app.engines.funnels.runs.due.goals import watch_goals
from app.engines.funnels.runs.work.runner import Runner
from app.integrations.mail import MailSender
from app.runtime import Runtime
from app.sandbox.smtp import SmtpSink
from app.settings import FunnelSettings, MailSettings
from app.wiring import funnels_deps


@pytest.fixture(scope="session")
def session_sink() -> Iterator[SmtpSink]:
    with SmtpSink() as sink:
        yield sink


@pytest.fixture
def sink(session_sink: SmtpSink) -> SmtpSink:
    session_sink.reset()
    return session_sink


@dataclass
class Engine:
    """The engine's moving parts on the test's runtime and clock, with mail going to the sink."""

    runtime: Runtime
    clock: ManualClock
    sink: SmtpSink
    runner: Runner
    deliverer: Deliverer

    async def drive(self, *, deliver: bool = True, rounds: int = 50) -> None:
        """Match events, execute due runs and deliver due effects until nothing is left."""
        for _ in range(rounds):
            busy = False
            events, _started = await match_events(
                self.runtime.db, now=self.clock.now(), segments=evaluate_segments
            )
            busy |= events > 0
            busy |= (await watch_goals(self.runtime.db, now=self.clock.now())) > 0
            result = await self.runner.run_batch(owner="test-worker", now=self.clock.now())
            busy |= result.leased > 0
            if deliver:
                delivered = await self.deliverer.run_batch(
                    owner="test-deliverer", now=self.clock.now
                )
                busy |= delivered.leased > 0
            if not busy:
                return
        raise AssertionError("the engine did not settle")

    async def advance(self, **delta: float) -> None:
        """Move the clock and drive what became due."""
        self.clock.advance(**delta)
        await self.drive()


@pytest.fixture
def funnel_settings() -> FunnelSettings:
    return FunnelSettings(lease_seconds=60, retry_base_seconds=60)


@pytest.fixture
def engine(
    runtime: Runtime, clock: ManualClock, sink: SmtpSink, funnel_settings: FunnelSettings
) -> Engine:
    mail = MailSettings(
        smtp_host=sink.host,
        smtp_port=sink.port,
        from_address="funnels@test.example",
        timeout_seconds=5,
    )
    signing = WorkspaceTracking(
        runtime.db, runtime.secrets, runtime.settings.web.public_url, runtime.clock
    )
    email: ChannelSender = EmailChannel(
        MailSender(mail), signing=signing, mailto_address="unsubscribe@test.example"
    )

    def senders(channel: str) -> ChannelSender | None:
        return email if channel == "email" else None

    runner = Runner(runtime.db, funnel_settings, mail_domain="test.example", executors=EXECUTORS)
    deliverer = Deliverer(
        runtime.db,
        funnel_settings,
        senders,
        lease_seconds=60,
        address_key=runtime.secrets.derive(erased_addresses.PURPOSE),
    )
    return Engine(runtime, clock, sink, runner, deliverer)


def replace_funnels_deps(runtime: Runtime, **changes: Any) -> None:
    """The runtime's funnels dependencies with ``changes`` (e.g. a trial-mail sender pointed at
    the test's SMTP sink), the rest built as the process builds them."""
    runtime.resources.provide(
        FunnelsDeps, lambda: dataclasses.replace(funnels_deps(runtime), **changes)
    )


async def contact(runtime: Runtime, ws: int, email: str, **kw: Any) -> int:
    async with runtime.db.write() as uow:
        c = await create_contact(
            uow.session, ws, ContactData(email=email, **kw), runtime.clock.now()
        )
        return c.id


async def bulk_contacts(runtime: Runtime, ws: int, n: int, prefix: str = "bulk") -> list[int]:
    """``n`` bare contacts in one insert (addresses ``<prefix><i>@x.test``); their ids in order."""
    now = runtime.clock.now()
    rows = [
        {
            "workspace_id": ws,
            "email": f"{prefix}{i}@x.test",
            "first_name": "",
            "last_name": "",
            "timezone": "UTC",
            "fields": {},
            "consent": {},
            "suppressed": {},
            "created_at": now,
            "updated_at": now,
        }
        for i in range(n)
    ]
    async with runtime.db.write() as uow:
        await uow.session.execute(insert(Contact), rows)
        ids = await uow.session.scalars(
            select(Contact.id).where(Contact.email.like(f"{prefix}%")).order_by(Contact.id)
        )
        return list(ids)


async def entered_contacts(
    runtime: Runtime, ws: int, version: FunnelVersion, n: int, prefix: str = "c"
) -> list[int]:
    """``n`` bare contacts (``<prefix><i>@x.test``), each entered into ``version`` now, in one
    transaction; their ids in order."""
    ids = await bulk_contacts(runtime, ws, n, prefix)
    async with runtime.db.write() as uow:
        for contact_id in ids:
            await enter(
                uow.session, version=version, contact_id=contact_id, now=runtime.clock.now()
            )
    return ids


async def setup_names(
    runtime: Runtime,
    ws: int,
    *,
    tags: Sequence[str] = (),
    lists: Sequence[str] = (),
    fields: dict[str, str] | None = None,
) -> None:
    async with runtime.db.write() as uow:
        await ensure_names(uow.session, Tag, ws, tags)
        await ensure_names(uow.session, ContactList, ws, lists)
        for key, kind in (fields or {}).items():
            await define_field(uow.session, ws, key, kind)


async def published(
    runtime: Runtime, ws: int, definition: dict[str, Any], name: str = "F"
) -> tuple[int, FunnelVersion]:
    async with runtime.db.write() as uow:
        funnel = await create_funnel(
            uow.session, ws, name, parse_definition(definition), runtime.clock.now()
        )
        version = await publish(uow.session, ws, funnel.id, user_id=None, now=runtime.clock.now())
        return funnel.id, version


async def republish(
    runtime: Runtime, ws: int, funnel_id: int, definition: dict[str, Any]
) -> FunnelVersion:
    from app.engines.funnels.definitions.service import update_funnel

    async with runtime.db.write() as uow:
        await update_funnel(
            uow.session,
            ws,
            funnel_id,
            now=runtime.clock.now(),
            definition=parse_definition(definition),
        )
        return await publish(uow.session, ws, funnel_id, user_id=None, now=runtime.clock.now())


async def runs_of(runtime: Runtime, funnel_id: int) -> list[Run]:
    async with runtime.db.read() as s:
        return list(await s.scalars(select(Run).where(Run.funnel_id == funnel_id).order_by(Run.id)))


async def steps_of(runtime: Runtime, run_id: int) -> list[Step]:
    async with runtime.db.read() as s:
        return list(await s.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.seq)))


async def effects(runtime: Runtime, **where: Any) -> list[OutboxEffect]:
    async with runtime.db.read() as s:
        stmt = select(OutboxEffect).order_by(OutboxEffect.id)
        for k, v in where.items():
            stmt = stmt.where(getattr(OutboxEffect, k) == v)
        return list(await s.scalars(stmt))


async def count(runtime: Runtime, model: Any, *conditions: Any) -> int:
    async with runtime.db.read() as s:
        return int(await s.scalar(select(func.count()).select_from(model).where(*conditions)) or 0)


def content(body: str) -> str:
    """A received message's text without the unsubscribe footer the deliverer adds."""
    return re.split(r"\r?\n\r?\n--\r?\nUnsubscribe: ", body)[0].strip()


def node(kind: str, id: str, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "id": id, **kw}


def email_node(
    id: str, subject: str = "Hi {{first_name}}", body: str = "Body", **kw: Any
) -> dict[str, Any]:
    return node("send_email", id, subject=subject, body=body, **kw)


def graph(
    *nodes: dict[str, Any], triggers: list[dict[str, Any]] | None = None, **kw: Any
) -> dict[str, Any]:
    nodes_list = [dict(n) for n in nodes]
    if nodes_list and not any(n.get("entry") for n in nodes_list):
        nodes_list[0]["entry"] = True
    return {"nodes": nodes_list, "triggers": triggers or [], **kw}


@dataclass(frozen=True)
class Space:
    """A bare workspace (no users: password hashing is slow and engine tests need none)."""

    workspace_id: int
    ingest_token: str


@pytest.fixture
async def space(runtime: Runtime) -> Space:
    from app.platform import service

    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Org", now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name="Main", now=now
        )
    return Space(created.workspace.id, created.ingest_token)


async def settle(runtime: Runtime) -> None:
    """Process stored events, evaluate touched segments and match events to funnels."""
    await run_ingest(runtime.context(job_id="test-ingest"), IngestPayload())


def signed(
    secret: str,
    payload: Any,
    *,
    workspace_id: int | None = None,
    at: int | None = None,
    header: str = "X-Sweepline-Signature",
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    headers = {
        header: sign_body(secret, body, at if at is not None else int(time.time())),
        "Content-Type": "application/json",
    }
    if workspace_id is not None:
        headers["X-Sweepline-Workspace"] = str(workspace_id)
    return body, headers


async def tagging_funnel(runtime: Runtime, ws: int, *triggers: dict[str, Any], **kw: Any) -> int:
    """A published funnel that tags whoever enters it ``entered``; returns its id."""
    await setup_names(runtime, ws, tags=["entered"])
    funnel_id, _ = await published(
        runtime, ws, graph(node("add_tag", "t", tag="entered"), triggers=list(triggers), **kw)
    )
    return funnel_id
