"""The send-gate matrix's harness: every sender built on the real engine, contacts brought into
each suppression state through the product's own doors (the RFC 8058 one-click POST, the
preference page, the contacts API, deletion and re-creation), and what each recipient got read
back from the SMTP sink and the provider simulators, with the reason recorded for what was held.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import select

from app.engines.funnels.campaigns.work.sender import CampaignSender, send_until_done
from app.engines.funnels.campaigns.work.transport import SmtpPool
from app.engines.funnels.consent import gate
from app.engines.funnels.events.tracking import MessageRef, Tracking
from app.engines.funnels.models import DeliveryEvent, Funnel, FunnelVersion, OutboxEffect
from app.engines.funnels.outbox.work.deliver import Deliverer
from app.engines.funnels.outbox.work.unsubscribe import UnsubscribeRef, links_for
from app.engines.funnels.runs.due.entry import enter
from app.integrations.mail import MailSender
from app.settings import FunnelSettings, MailSettings
from tests.conftest import auth
from tests.engines.funnels.factories import (
    graph,
    node,
    published,
    replace_funnels_deps,
    setup_names,
)
from tests.engines.funnels.outside.conftest import Outside
from tests.factories import Tenant

TOPIC = "news"
SENT = "sent"
HELD = "held"
"""Not received; the reason is recorded (a skipped row, a refused test send)."""
EMAIL_SENDERS = ("funnel_email", "campaign", "test_send")
CHANNEL = {"funnel_email": "email", "campaign": "email", "test_send": "email", "sms": "sms"}
CHANNEL |= {"push": "push", "letter": "letter", "webhook": "email", "webhook_to_person": "email"}
"""The channel whose choices a kind sets for a sender (a webhook's: the contact's e-mail)."""
WEBHOOKS = ("webhook", "webhook_to_person")
"""An ``http_request`` step; the second messages the contact (``to_contact: email``)."""
ADDRESS_FIELDS = {
    "address_line1": "1 Main St",
    "address_city": "Berlin",
    "address_postal_code": "10115",
    "address_country": "DE",
}
NODE = {
    "funnel_email": lambda i: node("send_email", i, subject="News", body="Hi {{first_name}}"),
    "test_send": lambda i: node("send_email", i, subject="News", body="Hi {{first_name}}"),
    "sms": lambda i: node("send_sms", i, text="Hi {{first_name}}"),
    "push": lambda i: node("send_push", i, title="News", body="Hi {{first_name}}"),
    "letter": lambda i: node("send_letter", i, body="Dear {{first_name}}"),
}


@dataclass
class Person:
    kind: str
    email: str
    phone: str
    contact_id: int = 0

    def body(self) -> dict[str, Any]:
        return {
            "email": self.email,
            "phone": self.phone,
            "first_name": self.kind.replace("_", "-"),
            "fields": {"push_token": f"tok-{self.kind}", **ADDRESS_FIELDS},
        }


@dataclass
class Matrix:
    """One sender in one workspace, its recipients one per suppression kind."""

    outside: Outside
    client: httpx.AsyncClient
    tenant: Tenant
    sender: str
    transactional: bool = False
    step_transactional: bool = False
    """The send step marked transactional (its funnel not)."""
    people: dict[str, Person] = field(default_factory=dict)
    funnel_id: int = 0
    campaign_id: int = 0
    test_answers: dict[str, httpx.Response] = field(default_factory=dict)

    @property
    def ws(self) -> int:
        return self.tenant.workspace_id

    @property
    def runtime(self) -> Any:
        return self.outside.runtime

    async def prepare(self, nodes: int = 1, quiet: tuple[int, int] | None = None) -> None:
        """Providers, the deliverer with the erased addresses' key, and the sender's funnel or
        campaign (its topic exists before anyone chooses on the preference page)."""
        o = self.outside
        key = gate.address_key(self.runtime.secrets)
        o.deliverer = Deliverer(
            self.runtime.db,
            FunnelSettings(lease_seconds=60, retry_base_seconds=60, max_send_attempts=4),
            o.senders.get,
            lease_seconds=60,
            address_key=key,
        )
        await setup_names(
            self.runtime, self.ws, fields=dict.fromkeys(["push_token", *ADDRESS_FIELDS], "text")
        )
        for kind, shape in (("sms", "sms"), ("push", "push"), ("letter", "letter")):
            getattr(o, kind)()
            await o.provider(self.ws, kind, shape="json", secret=f"{shape}-sandbox-key")
        settings: dict[str, Any] = {"topic": TOPIC, "transactional": self.transactional}
        if quiet is not None:
            settings |= {"quiet_start_hour": quiet[0], "quiet_end_hour": quiet[1]}
        if self.sender == "campaign":
            made = await self.client.post(
                "/api/v1/funnels/campaigns",
                json={
                    "name": "News",
                    "subject": "News",
                    "body": "Hi {{first_name}}",
                    "topic": TOPIC,
                    "transactional": self.transactional,
                },
                headers=auth(self.tenant),
            )
            assert made.status_code == 201, made.text
            self.campaign_id = made.json()["id"]
            return
        if self.sender in WEBHOOKS:
            o.echo()
            async with self.runtime.db.write() as uow:
                from sqlalchemy import update

                from app.platform.models import Workspace

                await uow.session.execute(
                    update(Workspace).where(Workspace.id == self.ws).values(allow_private_http=True)
                )
            build = lambda i: node(  # noqa: E731
                "http_request",
                i,
                url=o.sims.urls["echo"] + "/hook",
                body="Hi {{first_name}}",
                **({"to_contact": "email"} if self.sender == "webhook_to_person" else {}),
            )
        else:
            build = NODE[self.sender]
        ids = [f"m{i}" for i in range(nodes)]
        step = {"transactional": True} if self.step_transactional else {}
        chain = [
            {**build(i), **step, **({"next": ids[n + 1]} if n + 1 < len(ids) else {})}
            for n, i in enumerate(ids)
        ]
        self.funnel_id, _ = await published(
            self.runtime, self.ws, graph(*chain, triggers=[{"kind": "manual"}], settings=settings)
        )

    async def add(self, kind: str, n: int) -> Person:
        person = Person(kind, f"{kind}@matrix.test", f"+4915100{n:05d}")
        person.contact_id = await self._create(person)
        self.people[kind] = person
        return person

    async def _create(self, person: Person) -> int:
        made = await self.client.post(
            "/api/v1/funnels/contacts", json=person.body(), headers=auth(self.tenant)
        )
        assert made.status_code == 201, made.text
        return int(made.json()["id"])

    # -- the suppression kinds, each through the door a person or a report uses ---------------

    def _link(self, person: Person) -> str:
        ref = UnsubscribeRef(
            MessageRef(self.ws, person.contact_id, effect="earlier-message"), TOPIC
        )
        links = links_for(
            self.runtime.settings.web.public_url, self.tenant.webhook_secret, ref, mailto_address=""
        )
        return links.url.removeprefix(self.runtime.settings.web.public_url)

    async def apply(self, kind: str, person: Person) -> None:
        base = kind.removeprefix("recreated_")
        channel = CHANNEL[self.sender]
        if base == "unsubscribe_all":
            r = await self.client.post(self._link(person), data={"scope": "all"})
        elif base == "topic_one_click":
            r = await self.client.post(
                self._link(person),
                content=b"List-Unsubscribe=One-Click",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        elif base == "topic_preferences":
            # Every box unticked but none: the funnel's and campaign's topic is left.
            r = await self.client.post(f"{self._link(person)}/preferences", data={"topic": ""})
        elif base == "consent_withdrawn":
            r = await self._patch(person, {"consent": {channel: "withdrawn"}})
        elif base in ("channel_opt_out", "bounced", "complained"):
            value = "unsubscribed" if base == "channel_opt_out" else base
            r = await self._patch(person, {"suppressed": {channel: value}})
        else:
            assert base == "control", kind
            return
        assert r.status_code == 200, (kind, r.text)
        if kind != base:
            # Deleted (its suppression kept under the address's hash) and created again.
            gone = await self.client.delete(
                f"/api/v1/funnels/contacts/{person.contact_id}", headers=auth(self.tenant)
            )
            assert gone.status_code == 204, gone.text
            person.contact_id = await self._create(person)

    async def _patch(self, person: Person, body: dict[str, Any]) -> httpx.Response:
        return await self.client.patch(
            f"/api/v1/funnels/contacts/{person.contact_id}", json=body, headers=auth(self.tenant)
        )

    # -- sending ----------------------------------------------------------------------------

    async def enrol(self) -> None:
        async with self.runtime.db.write() as uow:
            version = await uow.session.scalar(
                select(FunnelVersion)
                .join(Funnel, Funnel.current_version_id == FunnelVersion.id)
                .where(Funnel.id == self.funnel_id)
            )
            assert version is not None
            for person in self.people.values():
                await enter(
                    uow.session,
                    version=version,
                    contact_id=person.contact_id,
                    now=self.runtime.clock.now(),
                )

    async def send(self) -> None:
        if self.sender == "campaign":
            await self.send_campaign()
        elif self.sender == "test_send":
            await self.test_sends()
        else:
            await self.enrol()
            await self.outside.drive()

    async def another_campaign(self) -> int:
        """A second campaign like the first (the frequency cap's test)."""
        made = await self.client.post(
            "/api/v1/funnels/campaigns",
            json={
                "name": "More news",
                "subject": "More news",
                "body": "Hi {{first_name}}",
                "topic": TOPIC,
                "transactional": self.transactional,
            },
            headers=auth(self.tenant),
        )
        assert made.status_code == 201, made.text
        return int(made.json()["id"])

    async def events(self, kind: str) -> list[str]:
        """The details of the workspace's delivery events of ``kind``."""
        async with self.runtime.db.read() as s:
            return list(
                await s.scalars(
                    select(DeliveryEvent.detail).where(
                        DeliveryEvent.workspace_id == self.ws, DeliveryEvent.kind == kind
                    )
                )
            )

    async def send_campaign(self, campaign_id: int | None = None) -> None:
        cid = campaign_id or self.campaign_id
        started = await self.client.post(
            f"/api/v1/funnels/campaigns/{cid}/audience", headers=auth(self.tenant)
        )
        assert started.status_code == 200, started.text
        sink = self.outside.sink
        mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="n@test.example")
        pool = SmtpPool(mail, 2)
        sender = CampaignSender(
            self.runtime.db,
            pool,
            owner="matrix",
            domain="test.example",
            in_flight=2,
            signing=Tracking(self.runtime.settings.web.public_url, self.tenant.webhook_secret),
            address_key=gate.address_key(self.runtime.secrets),
        )
        try:
            assert await send_until_done(sender, cid, self.runtime.clock)
        finally:
            await pool.aclose()

    async def test_sends(self) -> None:
        sink = self.outside.sink
        mail = MailSettings(smtp_host=sink.host, smtp_port=sink.port, from_address="t@test.example")
        replace_funnels_deps(self.runtime, trial_mail=MailSender(mail))
        for kind, person in self.people.items():
            self.test_answers[kind] = await self.client.post(
                f"/api/v1/funnels/{self.funnel_id}/test-send",
                json={"node_id": "m0", "to": person.email, "draft": False},
                headers=auth(self.tenant),
            )

    # -- what happened ----------------------------------------------------------------------

    def received(self) -> dict[str, int]:
        """How many messages each kind's recipient got, read at the sink and the simulators."""
        o = self.outside
        got = {kind: 0 for kind in self.people}
        by_email = {p.email: k for k, p in self.people.items()}
        by_name = {p.kind.replace("_", "-"): k for k, p in self.people.items()}
        if self.sender in EMAIL_SENDERS:
            for message in o.sink.messages:
                for to in message.to:
                    if to in by_email:
                        got[by_email[to]] += 1
            return got
        texts: list[str] = []
        if self.sender == "sms":
            texts = [m["body"] for m in o.sms().messages.values()]
        elif self.sender == "push":
            texts = [m["body"] for m in o.push().notifications.values()]
        elif self.sender == "letter":
            texts = [m["to"]["name"] for m in o.letter().letters.values()]
        elif self.sender in WEBHOOKS:
            texts = [m["body"] for m in o.echo().received]
        for text in texts:
            name = text.removeprefix("Hi ").removeprefix("Dear ").strip()
            got[by_name[name]] += 1
        return got

    async def reasons(self) -> dict[str, str]:
        """The reason recorded for each recipient held back (empty: none recorded)."""
        if self.sender == "test_send":
            return {
                k: f"{r.status_code} {r.json().get('code')}: {r.json().get('message')}"
                for k, r in self.test_answers.items()
                if r.status_code != 200
            }
        ids = {p.contact_id: k for k, p in self.people.items()}
        if self.sender == "campaign":
            listed = await self.client.get(
                f"/api/v1/funnels/campaigns/{self.campaign_id}/recipients",
                params={"status": "skipped", "limit": 100},
                headers=auth(self.tenant),
            )
            assert listed.status_code == 200, listed.text
            return {ids[r["contact_id"]]: r["detail"] or "" for r in listed.json()["items"]}
        async with self.runtime.db.read() as s:
            rows = (
                await s.execute(
                    select(OutboxEffect.contact_id, OutboxEffect.last_error, DeliveryEvent.detail)
                    .join(DeliveryEvent, DeliveryEvent.outbox_id == OutboxEffect.id)
                    .where(
                        OutboxEffect.workspace_id == self.ws,
                        OutboxEffect.status == "skipped",
                        DeliveryEvent.kind == "suppressed",
                    )
                )
            ).all()
        return {ids[c]: f"{err} / {detail}" for c, err, detail in rows if c in ids}
