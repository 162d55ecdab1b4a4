"""FN-31, FN-32, FN-20, FN-20b, hard case 2: one consent gate for every sender — a matrix.

Each sender (a funnel's e-mail, SMS, push, letter and webhook steps, a campaign, a funnel's test
send) is run against one recipient per suppression kind, each brought about through the door a
person or a report uses: "unsubscribe from all" on the one-click page, the RFC 8058 one-click
POST leaving the topic, the preference page leaving it, consent withdrawn and a channel opt-out
(contacts API), a hard bounce, a complaint — and each of those again after the contact was
deleted and created anew with the same address (FN-32). What each recipient got is read at the
aiosmtpd sink and the provider simulators; every recipient held back has its reason recorded
(the skipped effect and its delivery event, the campaign recipient's ``detail`` as the API lists
it, the test send's 422). The same with the funnel or campaign marked transactional: exempt
from marketing choices, never from a bounce or a complaint. Frequency cap and quiet hours have
tests of their own below.

Policy read from the matrix: e-mail choices (all, a topic) concern e-mail only; a webhook
(``http_request``) calls the workspace's own systems about the contact and, like a team
notification, is not the contact's to refuse, unless it is marked as messaging the contact
(``to_contact``: here ``email``), when it is judged as a message on that channel; FN-32 keeps suppression, not consent, and keeps it
for the e-mail address and the phone number (push tokens and postal addresses are not kept).
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.engines.funnels.models import Run
from tests.engines.funnels.consent.harness import (
    CHANNEL,
    HELD,
    SENT,
    Matrix,
)

BASE_KINDS = (
    "unsubscribe_all",
    "topic_one_click",
    "topic_preferences",
    "consent_withdrawn",
    "channel_opt_out",
    "bounced",
    "complained",
)
KINDS = ("control", *BASE_KINDS, *(f"recreated_{k}" for k in BASE_KINDS))
SENDERS = (
    "funnel_email",
    "campaign",
    "test_send",
    "sms",
    "push",
    "letter",
    "webhook",
    "webhook_to_person",
)
EMAIL_CHOICES = ("unsubscribe_all", "topic_one_click", "topic_preferences")
KEPT_CHANNELS = ("email", "sms")
"""Channels whose suppression FN-32 keeps under the address's hash."""


def expected(sender: str, kind: str, transactional: bool) -> str:
    """What the policy says the recipient of ``kind`` gets from ``sender``."""
    base = kind.removeprefix("recreated_")
    recreated = base != kind
    channel = CHANNEL[sender]
    if sender == "webhook" or base == "control":
        return SENT
    if base in EMAIL_CHOICES and channel != "email":
        return SENT
    if recreated and (base == "consent_withdrawn" or channel not in KEPT_CHANNELS):
        return SENT
    if transactional and base not in ("bounced", "complained"):
        return SENT
    return HELD


CASES = [
    pytest.param(sender, transactional, id=f"{sender}{'-transactional' if transactional else ''}")
    for sender in SENDERS
    for transactional in (False, True)
    if not (sender == "webhook" and transactional)
]


STEP_CASES = [
    pytest.param(sender, id=f"{sender}-step-transactional")
    for sender in ("funnel_email", "test_send", "sms", "push", "letter", "webhook_to_person")
]


@pytest.mark.parametrize(("sender", "transactional"), CASES)
async def test_fn31_fn32_every_sender_against_every_suppression_kind(
    outside, client, tenant, sender: str, transactional: bool
) -> None:
    await _matrix(Matrix(outside, client, tenant, sender, transactional))


@pytest.mark.parametrize("sender", STEP_CASES)
async def test_fn31_a_send_step_marked_transactional_in_a_marketing_funnel(
    outside, client, tenant, sender: str
) -> None:
    """FN-31: "funnel, send step or campaign": the step's own flag exempts it as the funnel's
    would (from marketing choices, not from a bounce or a complaint)."""
    await _matrix(Matrix(outside, client, tenant, sender, step_transactional=True))


async def _matrix(matrix: Matrix) -> None:
    sender = matrix.sender
    transactional = matrix.transactional or matrix.step_transactional
    await matrix.prepare()
    for n, kind in enumerate(KINDS):
        person = await matrix.add(kind, n)
        await matrix.apply(kind, person)
    await matrix.send()

    received = matrix.received()
    reasons = await matrix.reasons()
    wrong = {}
    for kind in KINDS:
        want = expected(sender, kind, transactional)
        got = SENT if received[kind] == 1 else HELD if received[kind] == 0 else f"{received[kind]}x"
        recorded = reasons.get(kind, "")
        if got != want or (want == HELD) != bool(recorded):
            wrong[kind] = {"expected": want, "got": got, "recorded": recorded}
    assert wrong == {}, "cells that broke the policy:\n" + "\n".join(
        f"  {sender}{'-transactional' if transactional else ''} x {kind}: {v}"
        for kind, v in wrong.items()
    )
    if sender in ("funnel_email", "campaign"):
        # Transactional mail carries no unsubscribe headers; marketing mail always does.
        headers = {"List-Unsubscribe" in m.headers for m in matrix.outside.sink.messages}
        assert headers == {not transactional}
    if sender == "webhook_to_person":
        # A request held back is not a failure: the run goes on without its answer (a deleted
        # contact's run ended when the contact was deleted).
        async with matrix.runtime.db.read() as s:
            statuses = set(
                await s.scalars(select(Run.status).where(Run.funnel_id == matrix.funnel_id))
            )
        assert "failed" not in statuses
        assert "completed" in statuses
    if sender == "test_send":
        for kind, answer in matrix.test_answers.items():
            if answer.status_code != 200:
                assert answer.status_code == 422, (kind, answer.text)
                assert answer.json()["code"] == "recipient_suppressed"


async def _cap_one_a_day(matrix: Matrix) -> None:
    from tests.conftest import auth

    capped = await matrix.client.put(
        "/api/v1/funnels/frequency-cap", json={"per_day": 1}, headers=auth(matrix.tenant)
    )
    assert capped.status_code == 200, capped.text


@pytest.mark.parametrize(("sender", "transactional"), CASES)
async def test_fn20b_the_frequency_cap_through_the_gate(
    outside, client, tenant, sender: str, transactional: bool
) -> None:
    """One marketing message a day: a funnel's second message waits for the contact's next day
    (its delivery event says until when), a second campaign's recipient is skipped with the
    reason, a test send is counted nowhere and a webhook is no message; transactional ones are
    neither counted nor held."""
    matrix = Matrix(outside, client, tenant, sender, transactional)
    await matrix.prepare(nodes=2)
    await _cap_one_a_day(matrix)
    await matrix.add("control", 0)
    if sender == "campaign":
        await matrix.send_campaign()
        second = await matrix.another_campaign()
        await matrix.send_campaign(second)
        matrix.campaign_id = second
        reasons = await matrix.reasons()
        want = {} if transactional else {"control": "frequency cap reached: skipped"}
        assert reasons == want
        assert matrix.received() == {"control": 1 if not transactional else 2}
        return
    await matrix.enrol()
    await outside.drive()
    if sender == "test_send":
        await matrix.test_sends()
        assert matrix.test_answers["control"].status_code == 200
        # Two funnel messages (the second waits unless transactional), then the test.
        assert matrix.received() == {"control": 3 if transactional else 2}
        return
    held = sender != "webhook" and not transactional
    assert matrix.received() == {"control": 1 if held else 2}
    capped = await matrix.events("capped")
    if held:
        [detail] = capped
        assert detail == "frequency cap reached: waits until 2026-03-03T00:00:00+00:00"
        await outside.advance(days=1)
        assert matrix.received() == {"control": 2}
    else:
        assert capped == []


@pytest.mark.parametrize(("sender", "transactional"), CASES)
async def test_fn20_quiet_hours_are_checked_again_at_send_time(
    outside, client, tenant, sender: str, transactional: bool
) -> None:
    """Quiet hours 21:00–08:00 (the funnel's): a message queued at 20:59 but delivered at 21:01
    waits until 08:00 the next morning — the gate checks at send time, not only at queueing. A
    campaign has no quiet hours, a test send goes now, a webhook is no message."""
    matrix = Matrix(outside, client, tenant, sender, transactional)
    await matrix.prepare(quiet=(21, 8))
    await matrix.add("control", 0)
    outside.clock.advance(hours=11, minutes=59)  # 20:59 UTC, the contact's zone
    if sender in ("campaign", "test_send"):
        outside.clock.advance(minutes=2)
        await matrix.send()
        assert matrix.received() == {"control": 1}
        return
    await matrix.enrol()
    await outside.drive(deliver=False)
    outside.clock.advance(minutes=2)
    await outside.drive()
    held = sender != "webhook"
    assert matrix.received() == {"control": 0 if held else 1}
    waits = await matrix.events("held")
    if held:
        assert waits == ["quiet hours: waits until 2026-03-03T08:00:00+00:00"]
        await outside.advance(hours=10, minutes=58)  # 07:59
        assert matrix.received() == {"control": 0}
        await outside.advance(minutes=2)
    assert matrix.received() == {"control": 1}
