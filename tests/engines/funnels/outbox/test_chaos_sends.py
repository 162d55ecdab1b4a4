"""Chaos on PostgreSQL + Redis (FN-7, FN-28/FN-30): funnel mail and a campaign go out from one
``python -m app serve`` and two ``python -m app worker`` processes to a real SMTP server
(aiosmtpd), while a process that holds sending work (an outbox lease or the campaign's lease) is
SIGKILLed at a random moment — at least 15 times, ``serve`` and workers alike — and restarted.

What a kill may cost is what the killed process had on the wire: a message the server accepted
whose outcome was not committed yet is sent again (under its original Message-ID). Each send
slot takes its next message only once its previous outcome is committed, so a kill repeats at
most ``FUNNEL_DELIVER_IN_FLIGHT`` funnel messages and ``FUNNEL_CAMPAIGN_IN_FLIGHT`` campaign
messages of the killed process. The test counts, per kill, the Message-IDs the server saw twice
(a repeat is charged to the first kill after the original arrived), asserts each kill's count
within those bounds, and that nothing is lost: every effect and recipient recorded sent, each
Message-ID received.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from sqlalchemy import func, insert, select

from app.engines.funnels.campaigns.due.audience import materialise
from app.engines.funnels.campaigns.models import Campaign, Recipient
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.models import OUTBOX_SENT, Contact, OutboxEffect
from app.engines.funnels.runs.due.entry import enter
from app.platform import service
from app.runtime import Runtime
from app.sandbox.smtp import ReceivedMessage, SmtpSink
from tests.conftest import eventually
from tests.engines.funnels.factories import email_node, graph, published

# Fifteen kills of real processes and their recoveries take minutes: opt-in (CHAOS=1), like
# tests/scheduling/test_chaos_serve.py. Command and figures in docs/benchmarks.md.
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(os.environ.get("CHAOS") != "1", reason="opt-in: set CHAOS=1"),
]
ROOT = Path(__file__).resolve().parents[4]
KILLS = int(os.environ.get("CHAOS_KILLS", "16"))
WAVE = 300
"""Funnel entrants added before each kill, so there is always mail going out."""
AUDIENCE = 3000
DELIVER_IN_FLIGHT = 4
CAMPAIGN_IN_FLIGHT = 4
MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>]+>)", re.MULTILINE | re.IGNORECASE)


class IdSink(SmtpSink):
    """An SMTP sink keeping only each message's Message-ID, in arrival order (parsing thousands
    of whole messages would be the slowest part of the test)."""

    def _receive(self, envelope: Any) -> str:
        raw = envelope.original_content or envelope.content
        found = MESSAGE_ID.search(raw if isinstance(raw, bytes) else raw.encode())
        with self._lock:
            self.messages.append(
                ReceivedMessage(
                    message_id=found.group(1).decode() if found else "",
                    to=list(envelope.rcpt_tos),
                    mail_from=envelope.mail_from,
                    subject="",
                    body="",
                    html=None,
                    headers={},
                    raw=b"",
                )
            )
        return "250 Message accepted for delivery"


@dataclass
class Process:
    """One ``python -m app <command>`` process with its log file."""

    command: str
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", self.command],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(10) == -signal.SIGKILL
        assert self._log is not None
        self._log.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self._log is not None:
            self._log.close()


@dataclass(frozen=True)
class Kill:
    command: str
    pid: int
    arrived: int
    """Messages the server had received when the process was dead."""


async def _contacts(runtime: Runtime, ws: int, prefix: str, n: int) -> list[int]:
    now = runtime.clock.now()
    rows = [
        {
            "workspace_id": ws,
            "email": f"{prefix}{i}@chaos.test",
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
        return list(
            await uow.session.scalars(
                select(Contact.id).where(Contact.email.like(f"{prefix}%@chaos.test"))
            )
        )


async def _enter(runtime: Runtime, version: Any, contact_ids: list[int]) -> None:
    async with runtime.db.write() as uow:
        for cid in contact_ids:
            await enter(uow.session, version=version, contact_id=cid, now=runtime.clock.now())


async def _holders(runtime: Runtime) -> set[int]:
    """Pids of the processes holding sending work now: an outbox lease or the campaign's."""
    async with runtime.db.read() as session:
        owners = set(
            await session.scalars(
                select(OutboxEffect.lease_owner)
                .where(OutboxEffect.lease_owner.is_not(None))
                .distinct()
            )
        )
        owners |= set(
            await session.scalars(
                select(Campaign.lease_owner).where(Campaign.lease_owner.is_not(None))
            )
        )
    return {int(owner.split(":")[1]) for owner in owners if owner}


async def _all_sent(runtime: Runtime, campaign_id: int) -> tuple[int, int]:
    async with runtime.db.read() as session:
        effects = await session.scalar(
            select(func.count()).select_from(OutboxEffect).where(OutboxEffect.status != OUTBOX_SENT)
        )
        recipients = await session.scalar(
            select(func.count())
            .select_from(Recipient)
            .where(Recipient.campaign_id == campaign_id, Recipient.status != "sent")
        )
    return int(effects or 0), int(recipients or 0)


@dataclass(frozen=True)
class Repeat:
    """A message that arrived again: where its previous copy and this one arrived, and the kill
    it is charged to (the first after the previous copy: that copy's sender died before it
    recorded the send). A message can repeat twice, its second sender killed too: that repeat
    is the second kill's."""

    message_id: str
    previous: int
    again: int
    kill: int


def repeats(kills: list[Kill], arrivals: list[str]) -> list[Repeat]:
    found: list[Repeat] = []
    previous: dict[str, int] = {}
    for index, mid in enumerate(arrivals):
        if mid in previous:
            sent = previous[mid]
            which = next((k for k, kill in enumerate(kills) if kill.arrived > sent), None)
            assert which is not None, f"{mid} repeated with no kill after it was last sent"
            found.append(Repeat(mid, sent, index, which))
        previous[mid] = index
    return found


def charge(kills: list[Kill], arrivals: list[str]) -> list[Counter[str]]:
    """Per kill, its repeated Message-IDs by kind (``funnel``/``campaign``)."""
    per_kill: list[Counter[str]] = [Counter() for _ in kills]
    for repeat in repeats(kills, arrivals):
        kind = "campaign" if repeat.message_id.startswith("<c") else "funnel"
        per_kill[repeat.kill][kind] += 1
    return per_kill


async def test_fn7_fn28_a_sigkilled_sender_repeats_at_most_what_it_had_on_the_wire(
    runtime: Runtime, tmp_path: Path
) -> None:
    settings = runtime.settings
    assert settings.queue.uses_redis, "the chaos run is on PostgreSQL + Redis"
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Chaos", now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name="Main", now=now
        )
    ws = created.workspace.id
    _, version = await published(runtime, ws, graph(email_node("one", subject="one")))
    await _contacts(runtime, ws, "c-", AUDIENCE)
    async with runtime.db.write() as uow:
        campaign = await create_campaign(
            uow.session,
            ws,
            CampaignData(name="News", subject="News", body="Hello", rate_per_minute=100_000),
            now,
        )
        campaign_id = campaign.id
    rng = random.Random(20261204)
    with IdSink() as sink:
        sink.slow_down(0.02)  # each DATA takes a moment, as on a real server: kills land mid-send
        env = _env(runtime, sink, tmp_path)
        procs = [
            Process("serve", {**env, "PORT": str(_free_port())}, tmp_path / "serve.log"),
            Process("worker", env, tmp_path / "worker-1.log"),
            Process("worker", env, tmp_path / "worker-2.log"),
        ]
        for p in procs:
            p.start()
        kills: list[Kill] = []
        entrants = 0
        try:
            async with runtime.db.write() as uow:
                assert await materialise(uow.session, campaign_id, now) == AUDIENCE
            for round_ in range(KILLS):
                ids = await _contacts(runtime, ws, f"k{round_}-", WAVE)
                await _enter(runtime, version, ids)
                entrants += WAVE
                # Kill serve and workers in turn, each time one that holds sending work.
                command = "serve" if round_ % 3 == 0 else "worker"
                victim = await _sending(runtime, procs, command, sink)
                await asyncio.sleep(rng.random() * 0.3)  # a random moment of its sending
                victim.kill()
                kills.append(Kill(victim.command, victim.pid, len(sink.snapshot())))
                print(f"  held by {sorted(await _holders(runtime))}", file=sys.stderr)
                print(f"kill {round_ + 1}: {victim.command} {victim.pid}", file=sys.stderr)
                victim.start()

            async def all_sent() -> bool:
                return await _all_sent(runtime, campaign_id) == (0, 0)

            await eventually(all_sent, timeout=600, interval=1)
        finally:
            for p in procs:
                p.stop()

        async with runtime.db.read() as session:
            funnel_ids = set(
                await session.scalars(select(OutboxEffect.payload["message_id"].as_string()))
            )
            done = await session.get(Campaign, campaign_id)
            assert done is not None
            assert done.status == "done"
        arrivals = [m.message_id for m in sink.snapshot()]
    campaign_ids = {f"<c{campaign_id}.r{seq}.w{ws}@" for seq in range(1, AUDIENCE + 1)}
    received = Counter(arrivals)
    assert len(funnel_ids) == entrants
    assert funnel_ids <= set(received), "no funnel mail lost"
    assert {mid.split("@")[0] + "@" for mid in received if mid.startswith("<c")} == campaign_ids
    assert {k.command for k in kills} == {"serve", "worker"}
    per_kill = charge(kills, arrivals)
    _show_repeats(kills, arrivals)
    for kill, charged in zip(kills, per_kill, strict=True):
        assert charged["funnel"] <= DELIVER_IN_FLIGHT, (kill, charged)
        assert charged["campaign"] <= CAMPAIGN_IN_FLIGHT, (kill, charged)
    _show_figures(kills, per_kill, received, entrants)


def _env(runtime: Runtime, sink: SmtpSink, tmp_path: Path) -> dict[str, str]:
    """The environment of the serve and worker processes: the test's databases and the sink."""
    settings = runtime.settings
    return {
        **os.environ,
        "DATABASE_URL": settings.database.url,
        "REDIS_URL": settings.queue.redis_url,
        "ARQ_QUEUE_NAME": settings.queue.arq_queue_name,
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "KEY_FILE": str(tmp_path / "keys.json"),
        "PUBLIC_URL": "http://sweepline.chaos",
        "SMTP_HOST": sink.host,
        "SMTP_PORT": str(sink.port),
        "LOG_FORMAT": "json",
        "FUNNEL_DELIVER_IN_FLIGHT": str(DELIVER_IN_FLIGHT),
        "FUNNEL_CAMPAIGN_IN_FLIGHT": str(CAMPAIGN_IN_FLIGHT),
        # Work a killed process held comes back within seconds; long enough that a process
        # starved of CPU on a shared machine still renews its leases in time.
        "JOB_LEASE_SECONDS": "20",
        "FUNNEL_LEASE_SECONDS": "20",
    }


def _show_figures(
    kills: list[Kill], per_kill: list[Counter[str]], received: Counter[str], entrants: int
) -> None:
    repeated = sum(n - 1 for n in received.values())
    print(
        f"\n{len(kills)} SIGKILLs ({sum(k.command == 'serve' for k in kills)} serve), "
        f"{entrants} funnel mails + {AUDIENCE} campaign mails, 0 lost; repeats: {repeated} "
        f"({repeated / len(kills):.2f} per kill, most in one kill: funnel "
        f"{max(r['funnel'] for r in per_kill)} of {DELIVER_IN_FLIGHT}, campaign "
        f"{max(r['campaign'] for r in per_kill)} of {CAMPAIGN_IN_FLIGHT}); per kill: "
        f"{[(k.command, dict(r)) for k, r in zip(kills, per_kill, strict=True)]}"
    )


def _show_repeats(kills: list[Kill], arrivals: list[str]) -> None:
    """Each repeat with where its copies arrived (for a failure's investigation)."""
    for r in repeats(kills, arrivals):
        print(
            f"repeat {r.message_id}: arrived #{r.previous} and #{r.again}, kill {r.kill}",
            file=sys.stderr,
        )


async def _sending(runtime: Runtime, procs: list[Process], command: str, sink: SmtpSink) -> Process:
    """A process that holds sending work while mail is arriving, running ``command`` if one
    does within 20 s (the queue decides which process takes the jobs), else any."""
    started = time.monotonic()
    chosen: list[Process] = []

    async def one_is_sending() -> bool:
        before = len(sink.snapshot())
        holders = await _holders(runtime)
        prefer = time.monotonic() - started < 20
        candidates = [p for p in procs if p.pid in holders and (p.command == command or not prefer)]
        if candidates and len(sink.snapshot()) > before:
            chosen.append(random.choice(candidates))
        return bool(chosen)

    await eventually(one_is_sending, timeout=120)
    return chosen[0]


def _free_port() -> int:
    from app.sandbox.base import free_port

    return free_port()
