"""What became of each effect of a batch, decided before anything is written: the consent gate's
verdict at send time (:func:`decisions`), what the frequency cap does to a message it refused
(:func:`capped`), and the :class:`Outcome` the recorder writes (``records/outcomes.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.engines.funnels.consent.gate import message_of
from app.engines.funnels.consent.policy import (
    SEND,
    Decision,
    Person,
    Skip,
    WaitUntil,
    after_cap,
    decide,
)
from app.engines.funnels.models import OUTBOX_SKIPPED
from app.engines.funnels.outbox.channel import LeasedEffect
from app.engines.funnels.outbox.payloads import Unreadable


def decisions(
    effects: list[LeasedEffect], people: dict[int, Person], now: datetime
) -> dict[int, Decision]:
    """What the consent gate says of each effect at send time (hard case 2, FN-31, FN-32). An
    unreadable payload is not the gate's to judge: it fails on its own."""
    return {
        e.id: SEND
        if isinstance(e.payload, Unreadable)
        else decide(message_of(e.channel, e.payload), people.get(e.contact_id), now)
        for e in effects
    }


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    leased: int = 0
    sent: int = 0
    skipped: int = 0
    deferred: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one effect, waiting to be recorded with the others of its group."""

    effect: LeasedEffect
    count: str
    """The :class:`DeliveryResult` field it counts in."""
    at: datetime
    status: str | None = None
    """The effect's final status, or ``None``: retried later, or not ours to record."""
    kind: str = ""
    detail: str = ""
    retry: bool = False
    retry_after: float | None = None
    capped_until: datetime | None = None
    """Held by the frequency cap until then (the funnel said wait)."""
    step_note: dict[str, str] | None = None
    """Added to the sending step's output as ``frequency_cap`` (what the cap did)."""


def capped(effect: LeasedEffect, until: datetime, at: datetime) -> Outcome:
    """What the frequency cap does to a message of a funnel (the gate's rule 7): wait for
    ``until`` or skip it."""
    payload = effect.payload
    said = (
        after_cap(message_of(effect.channel, payload), until)
        if not isinstance(payload, Unreadable)
        else WaitUntil(until, "", "frequency_cap")
    )
    if isinstance(said, Skip):
        return Outcome(
            effect,
            "skipped",
            at,
            OUTBOX_SKIPPED,
            "capped",
            said.reason,
            step_note={"action": "skipped", "at": at.isoformat()},
        )
    return Outcome(
        effect,
        "deferred",
        at,
        kind="capped",
        detail=said.reason,
        capped_until=until,
        step_note={"action": "waits", "until": until.isoformat()},
    )
