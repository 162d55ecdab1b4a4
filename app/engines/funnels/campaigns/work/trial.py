"""A campaign's preview and its test send (FN-77), both made by the sender's own
:func:`~app.engines.funnels.campaigns.work.compose.compose`, so what a person checks is what
recipients get: merge fields filled with a chosen contact's values, the preheader, the
unsubscribe footer.

A test goes to a few chosen addresses through the real mail path, marked as a test (``[Test]``
subject, ``X-Sweepline-Test`` header, unsubscribe links that lead to a page saying it was a test)
and counted nowhere: no recipient row, no delivery record, a Message-ID no report parser
recognises. An address the workspace must not mail is refused, naming why (as the funnels' test
send does), and then nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.campaigns.due.recipients import row_of
from app.engines.funnels.campaigns.models import Campaign
from app.engines.funnels.campaigns.work.compose import compose, message_of
from app.engines.funnels.consent import gate
from app.engines.funnels.consent.policy import Skip, decide
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.definitions.trial_send import TEST_LINK, RecipientSuppressed
from app.engines.funnels.events.tracking import Tracking
from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.work.render import render, variables
from app.engines.funnels.outbox.work.unsubscribe import UnsubscribeLinks
from app.errors import ValidationFailed
from app.integrations.mail import OutgoingEmail
from app.platform import audit

MAX_TEST_ADDRESSES = 5


@dataclass(frozen=True, slots=True)
class Preview:
    subject: str
    preheader: str
    text: str
    html: str | None
    contact: Contact | None


def _test_links(base_url: str) -> UnsubscribeLinks:
    url = f"{base_url.rstrip('/')}{TEST_LINK}"
    return UnsubscribeLinks(url=url, preferences_url=f"{url}/preferences", mailto="")


async def _person(session: ReadSession, workspace_id: int, contact_id: int | None) -> Contact:
    if contact_id is not None:
        return await get_contact(session, workspace_id, contact_id)
    return Contact(id=0, email="", first_name="", last_name="", timezone="UTC", fields={})


async def preview(
    session: ReadSession,
    campaign: Campaign,
    *,
    contact_id: int | None,
    base_url: str,
    domain: str,
) -> Preview:
    """The message as ``contact_id`` would get it (none: merge fields render empty)."""
    contact = await _person(session, campaign.workspace_id, contact_id)
    email = compose(
        campaign,
        row_of(contact),
        domain=domain,
        tracking=None,
        signing=Tracking(base_url, ""),
        test_links=_test_links(base_url),
    )
    return Preview(
        subject=email.subject.removeprefix("[Test] "),
        preheader=render(campaign.preheader or "", variables(contact, {})),
        text=email.text,
        html=email.html,
        contact=contact if contact_id is not None else None,
    )


def addresses(raw: list[str]) -> list[str]:
    """The test's addresses, checked: 1 to 5 e-mail addresses."""
    found = [a.strip() for a in raw if a.strip()]
    if not found:
        raise ValidationFailed.field("to", "at least one e-mail address")
    if len(found) > MAX_TEST_ADDRESSES:
        raise ValidationFailed.field("to", f"at most {MAX_TEST_ADDRESSES} addresses")
    for address in found:
        if "@" not in address or len(address) > 320 or any(c in address for c in "\r\n\x00 ,;"):
            raise ValidationFailed.field("to", f"{address!r} is not an e-mail address")
    return found


async def test_messages(
    session: ReadSession,
    campaign: Campaign,
    *,
    to: list[str],
    contact_id: int | None,
    base_url: str,
    domain: str,
    address_key: bytes | None,
    now: datetime,
) -> list[OutgoingEmail]:
    """One test message per address, once the consent gate let every address through.

    Raises:
        ValidationFailed: ``to`` is not 1 to 5 addresses.
        RecipientSuppressed: an address the workspace must not mail, naming it and why.
    """
    wanted = addresses(to)
    message = message_of(campaign)
    for address in wanted:
        person = await gate.person_at(session, address_key, campaign.workspace_id, address)
        said = decide(message, person, now)
        if isinstance(said, Skip):
            raise RecipientSuppressed(
                f"to: {address} must not be mailed ({said.reason})",
                details=[{"field": "to", "message": said.reason, "code": said.code}],
            )
    contact = await _person(session, campaign.workspace_id, contact_id)
    out = []
    for address in wanted:
        email = compose(
            campaign,
            row_of(contact),
            domain=domain,
            tracking=None,
            signing=Tracking(base_url, ""),
            test_links=_test_links(base_url),
        )
        out.append(
            OutgoingEmail(
                to=[address],
                subject=email.subject,
                text=email.text,
                html=email.html,
                message_id=email.message_id,
                headers=email.headers,
            )
        )
    return out


async def record_test(session: WriteSession, campaign: Campaign, sent: int, now: datetime) -> None:
    """The audit entry of a test send (how many addresses, not which: they may be anyone's)."""
    await audit.record(
        session,
        action="campaign.test_sent",
        object_type="campaign",
        object_id=campaign.id,
        workspace_id=campaign.workspace_id,
        after={"name": campaign.name, "addresses": sent},
        now=now,
    )
