"""The consent policy: whether one outgoing message may go now (FN-31, FN-32, FN-20, FN-20b).

A pure function of the message, what is known of its recipient and ``now``; the loading is
:mod:`app.engines.funnels.consent.gate`'s. Every sender — the funnel deliverer on each channel,
the campaign sender, the test send — asks :func:`decide`, and only it, so a choice a contact makes
anywhere stops every kind of message it concerns.

The rules, in order:

1. A deleted contact gets nothing.
2. Exempt: messages **about** the contact, not to them — team notifications (``internal``), and
   the requests a funnel makes on the contact's behalf to the workspace's own systems
   (``http``, ``payment``, ``booking``, ``ai``) — are not the contact's to refuse; only rule 1
   applies to them. An ``http_request`` marked ``to_contact`` messages the contact through
   another system: it is judged as a message on the channel it names.
3. A hard bounce or a complaint on the channel (``suppressed[channel]`` ``bounced`` or
   ``complained``) stops **every** message on it, transactional ones included.
4. Marketing choices, which a transactional message (its funnel or campaign marked so: the
   contact asked for it) is exempt from: leaving the channel (any other ``suppressed[channel]``
   value: ``email: unsubscribed`` is "unsubscribe from all"), consent withdrawn for the channel,
   and, for e-mail, leaving the message's topic (``topic:<name>``).
5. What an erased contact left behind under the hash of the same address (FN-32) counts as the
   recipient's own, through rules 3 and 4, whatever created the new contact.
6. Quiet hours the message carries (the funnel's or the run's): outside them it waits until
   they end in the recipient's time zone. They are the sender's own choice, so they hold
   transactional messages too.
7. The frequency cap (counted only for marketing messages on a message channel): decided after
   the atomic reservation (:func:`after_cap`); a funnel message waits for the contact's next day
   or week or is skipped as its funnel says, a campaign recipient is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from app.engines.funnels.outbox.work.unsubscribe import HARD, topic_key, topic_of
from app.engines.funnels.runs.due.times import quiet_release
from app.scheduling.zones import zone_or_utc

MESSAGE_CHANNELS = frozenset({"email", "sms", "push", "letter"})
"""Channels whose effects are messages to the contact (the others call the workspace's APIs)."""
WITHDRAWN = "withdrawn"

WAIT = "wait"
SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Person:
    """What the gate knows of a recipient at send time."""

    exists: bool = True
    """False: the contact was deleted (or never existed)."""
    timezone: str = "UTC"
    suppressed: Mapping[str, str] = field(default_factory=dict)
    consent: Mapping[str, str] = field(default_factory=dict)
    remembered: Mapping[str, str] = field(default_factory=dict)
    """Suppression kept under the hash of this contact's address when an earlier contact with
    it was erased (FN-32)."""


GONE = Person(exists=False)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message about to go out, as the policy sees it."""

    channel: str
    topic: str | None = None
    transactional: bool = False
    internal: bool = False
    """About the contact, to the team (notify_team): exempt."""
    quiet_hours: tuple[int, int] | None = None
    """Local start and end hour the message may not go out between."""
    when_capped: str = WAIT
    """What the frequency cap does to it: wait for the next period, or skip."""


@dataclass(frozen=True, slots=True)
class Send:
    kind: Literal["send"] = "send"


@dataclass(frozen=True, slots=True)
class Skip:
    """Not sent, ever: recorded as skipped with ``reason``."""

    reason: str
    code: str
    """A short stable name of the rule (``bounced``, ``topic``, ``erased``, …)."""
    kind: Literal["skip"] = "skip"


@dataclass(frozen=True, slots=True)
class WaitUntil:
    """Not now: due again at ``until``."""

    until: datetime
    reason: str
    code: str
    kind: Literal["wait"] = "wait"


Decision = Send | Skip | WaitUntil
SEND = Send()


def exempt(message: Outgoing) -> bool:
    """Not the contact's to refuse: a team notification or a request to the workspace's own
    systems."""
    return message.internal or message.channel not in MESSAGE_CHANNELS


def counts_against_cap(message: Outgoing) -> bool:
    """Whether the message takes a frequency-cap slot (marketing messages only)."""
    return not exempt(message) and not message.transactional


def _choices(
    message: Outgoing, suppressed: Mapping[str, str], consent: Mapping[str, str]
) -> Skip | None:
    """Rules 3 and 4 against one set of entries (the contact's own, or remembered ones)."""
    channel = message.channel
    left = suppressed.get(channel)
    if left in HARD:
        return Skip(f"suppressed on {channel}: {left}", str(left))
    if message.transactional:
        return None
    if left:
        return Skip(f"suppressed on {channel}: {left}", "unsubscribed")
    if consent.get(channel) == WITHDRAWN:
        return Skip(f"consent withdrawn for {channel}", "consent")
    if channel == "email":
        topic = topic_of(message.topic)
        if suppressed.get(topic_key(topic)):
            return Skip(f"unsubscribed from topic '{topic}'", "topic")
    return None


def decide(message: Outgoing, person: Person | None, now: datetime) -> Decision:
    """Whether ``message`` may go to ``person`` at ``now`` (rules 1–6; the cap: :func:`after_cap`)."""
    if person is None or not person.exists:
        return Skip("contact deleted", "deleted")
    if exempt(message):
        return SEND
    own = _choices(message, person.suppressed, person.consent)
    if own is not None:
        return own
    kept = _choices(message, person.remembered, {})
    if kept is not None:
        return Skip(f"{kept.reason} (kept from an erased contact with this address)", "erased")
    if message.quiet_hours is not None:
        start, end = message.quiet_hours
        release = quiet_release(now, zone_or_utc(person.timezone), start, end)
        if release > now:
            return WaitUntil(release, f"quiet hours: waits until {release.isoformat()}", "quiet")
    return SEND


def after_cap(message: Outgoing, capped_until: datetime) -> Skip | WaitUntil:
    """What the frequency cap does to a message it refused a slot (rule 7)."""
    if message.when_capped == SKIP:
        return Skip("frequency cap reached: skipped", "frequency_cap")
    return WaitUntil(
        capped_until,
        f"frequency cap reached: waits until {capped_until.isoformat()}",
        "frequency_cap",
    )
