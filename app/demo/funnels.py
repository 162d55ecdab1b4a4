"""Demo data: contacts, a welcome funnel with a wait, a condition and a goal (a draft: publishing it
is the first thing to try, and nothing is mailed before a person does), a hosted sign-up form that
feeds it once published (joining the Newsletter list), and a draft campaign to a segment of the
contacts (those in London), ready to schedule; and a small CSV import, applied by the background
import job, so the import page has a finished job and its report to show.

The demo's mail goes to the local SMTP sink (``sandboxes["smtp"]``); the dashboard's mailbox page
shows what arrived, and reports a message as SendGrid, Postmark or Mailgun would (their webhook
secrets are seeded, :mod:`app.demo.mail_reports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.demo.funnels_providers import SANDBOXES as PROVIDER_SANDBOXES
from app.demo.funnels_providers import configure_demo_providers
from app.demo.mail_reports import configure_report_secrets
from app.demo.parts import DemoPart
from app.engines.funnels.campaigns.service import CampaignData, create_campaign
from app.engines.funnels.contacts.csv_import import start_import
from app.engines.funnels.contacts.fields import define_field
from app.engines.funnels.contacts.memberships import ensure_names
from app.engines.funnels.contacts.saved_segments import SegmentData, create_segment
from app.engines.funnels.contacts.store import ContactData, create_contact
from app.engines.funnels.definitions.service import create_funnel, parse_definition
from app.engines.funnels.events.forms import FormField, create_form
from app.engines.funnels.models import ContactList, Tag
from app.sandbox.smtp import SmtpSink

if TYPE_CHECKING:
    from app.demo.parts import DemoWorkspace, SandboxHandle
    from app.runtime import Runtime

WELCOME: dict[str, Any] = {
    "triggers": [{"kind": "contact_created"}, {"kind": "list_join", "list": "Newsletter"}],
    "settings": {"quiet_start_hour": 21, "quiet_end_hour": 8},
    "nodes": [
        {
            "kind": "send_email",
            "id": "welcome",
            "entry": True,
            "subject": "Welcome, {{first_name}}!",
            "body": "Hello {{first_name}},\n\nthanks for joining {{company}}'s newsletter.",
            "next": "tag_new",
        },
        {"kind": "add_tag", "id": "tag_new", "tag": "onboarding", "next": "wait_2d"},
        {"kind": "wait", "id": "wait_2d", "days": 2, "hour": 9, "next": "bought"},
        {
            "kind": "condition",
            "id": "bought",
            "predicate": {"kind": "has_tag", "tag": "customer"},
            "yes": "done",
            "no": "nudge",
        },
        {
            "kind": "send_email",
            "id": "nudge",
            "subject": "{{first_name}}, a little something for you",
            "body": "Here is 10% off your first order. See you soon!",
            "next": "done",
        },
        {
            "kind": "goal",
            "id": "done",
            "label": "Became a customer",
            "predicate": {"kind": "has_tag", "tag": "customer"},
        },
    ],
}

SIGNUP_FIELDS = [
    FormField("first_name", "First name", required=True),
    FormField("company", "Company"),
]

VIP_READERS = SegmentData(
    name="VIP readers",
    description="Readers tagged vip: for invitations before everyone else",
    predicate={"kind": "has_tag", "tag": "vip"},
)

LONDON = CampaignData(
    name="London meetup invitation",
    subject="{{first_name}}, join us in London on the 12th",
    body=(
        "Hello {{first_name}},\n\nwe are meeting readers in London on the 12th. "
        "Details and sign-up: https://example.com/meetup\n\nSee you there!"
    ),
    html=(
        "<p>Hello {{first_name}},</p><p>we are meeting readers in London on the 12th. "
        '<a href="https://example.com/meetup">Details and sign-up</a>.</p><p>See you there!</p>'
    ),
    audience={"kind": "field", "field": "timezone", "op": "eq", "value": "Europe/London"},
    rate_per_minute=60,
)

PEOPLE = [
    ("ada@example.com", "Ada", "Lovelace", "Europe/London", "Analytical Engines"),
    ("grace@example.com", "Grace", "Hopper", "America/New_York", "Navy"),
    ("alan@example.com", "Alan", "Turing", "Europe/London", "Bletchley"),
    ("emmy@example.com", "Emmy", "Noether", "Europe/Berlin", "Göttingen"),
    ("katherine@example.com", "Katherine", "Johnson", "America/New_York", "NASA"),
]

IMPORT_CSV = (
    "email,first_name,last_name,timezone,company,tags\n"
    "marie@example.com,Marie,Curie,Europe/Paris,Sorbonne,vip\n"
    "linus@example.com,Linus,Pauling,America/Los_Angeles,Caltech,\n"
    "not-an-address,Nobody,Known,UTC,,\n"
)


async def seed_demo(runtime: Runtime, demo: DemoWorkspace) -> None:
    ws = demo.workspace_id
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        s = uow.session
        await define_field(s, ws, "company", "text", "Company")
        await define_field(s, ws, "signup_date", "date", "Signed up")
        await ensure_names(s, Tag, ws, ["customer", "onboarding", "vip"])
        await ensure_names(s, ContactList, ws, ["Newsletter"])
        await create_funnel(s, ws, "Welcome sequence", parse_definition(WELCOME), now)
        for email, first, last, tz, company in PEOPLE:
            await create_contact(
                s,
                ws,
                ContactData(
                    email=email,
                    first_name=first,
                    last_name=last,
                    timezone=tz,
                    fields={"company": company, "signup_date": now.date().isoformat()},
                    lists=["Newsletter"],
                    tags=["vip"] if first == "Grace" else [],
                    consent={"email": "granted"},
                ),
                now,
            )
        await create_form(
            s,
            ws,
            name="Newsletter sign-up",
            fields=SIGNUP_FIELDS,
            now=now,
            add_list="Newsletter",
            success_message="Thanks! Your welcome e-mail is on its way.",
        )
        await create_campaign(s, ws, LONDON, now)
        await create_segment(s, ws, VIP_READERS, now)
    async with runtime.db.write() as uow:
        await start_import(
            uow,
            runtime.queue,
            workspace_id=ws,
            text=IMPORT_CSV,
            columns=None,
            max_rows=runtime.settings.bulk.max_import_rows,
            now=now,
        )
    await configure_demo_providers(runtime, demo)
    await configure_report_secrets(runtime, ws)


def _smtp_sink() -> SandboxHandle:
    return SmtpSink().start()


PART = DemoPart(
    name="funnels", seed=seed_demo, sandboxes={"smtp": _smtp_sink, **PROVIDER_SANDBOXES}
)
