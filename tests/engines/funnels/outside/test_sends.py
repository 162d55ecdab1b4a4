"""send_sms, send_push, send_letter and notify_team as outbox effects delivered after commit,
each into its simulator exactly once (FN-7), with consent and suppression checked at send time
(hard case 2) and transient failures retried no sooner than the provider asked."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from app.engines.funnels.models import (
    OUTBOX_FAILED,
    OUTBOX_PENDING,
    OUTBOX_SENT,
    OUTBOX_SKIPPED,
    RUN_COMPLETED,
    RUN_FAILED,
    Contact,
    DeliveryEvent,
)
from tests.engines.funnels.factories import (
    Space,
    contact,
    count,
    effects,
    graph,
    node,
    published,
    runs_of,
    setup_names,
    steps_of,
)
from tests.engines.funnels.outside.conftest import Outside
from tests.factories import Tenant

CREATED = [{"kind": "contact_created"}]


async def sms_funnel(outside: Outside, ws: int, **wait: int) -> int:
    nodes = [node("send_sms", "text", text="Hi {{first_name}}, your code is ready")]
    if wait:
        nodes = [node("wait", "w", **wait, next="text"), *nodes]
    funnel_id, _ = await published(outside.runtime, ws, graph(*nodes, triggers=CREATED))
    return funnel_id


async def test_send_sms_exactly_once_when_redelivered(outside: Outside, space: Space) -> None:
    """FN-7: a deliverer that sends and dies before marking the row: the redelivery is
    recognised (idempotency key) and the provider holds one message."""
    ws = space.workspace_id
    sms = outside.sms()
    await outside.provider(
        ws, "sms", shape="json", secret="sms-sandbox-key", options={"sender": "Shop"}
    )
    funnel_id = await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada", phone="+4915112345678")
    await outside.drive(deliver=False)
    assert await outside.crash_after_send() == 1
    assert len(sms.messages) == 1
    [message] = sms.messages.values()
    assert message["to"] == "+4915112345678"
    assert message["body"] == "Hi Ada, your code is ready"
    assert message["from"] == "Shop"
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert effect.channel == "sms"
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED


async def test_send_sms_lost_reply_is_replayed_not_resent(outside: Outside, space: Space) -> None:
    """FN-7: the provider took the message but its answer was lost: the retry carries the same
    idempotency key, so the provider replays its first answer instead of sending again."""
    ws = space.workspace_id
    sms = outside.sms()
    sms.lost.arm(1, status=502)
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com", phone="+4915112345678")
    await outside.drive()
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_PENDING
    await outside.advance(seconds=61)
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert sms.state.count("messages.create") == 2
    assert len(sms.messages) == 1


async def test_twilio_sms_redelivery_reconciles(outside: Outside, space: Space) -> None:
    """FN-7 with the Twilio shape (no idempotency key): a redelivery after an unknown outcome
    finds the message it already sent instead of sending a second one."""
    ws = space.workspace_id
    twilio = outside.twilio()
    twilio.lost.arm(1, status=502)
    await outside.provider(
        ws,
        "sms",
        shape="twilio",
        secret="sandbox-twilio-token",
        options={"account_sid": "AC" + "0" * 32, "sender": "+15005550006"},
        url=outside.sims.urls["twilio"],
    )
    await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com", phone="+4915112345678")
    await outside.drive()
    await outside.advance(seconds=61)
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert len(twilio.sent_to("+4915112345678")) == 1


async def test_sms_suppression_and_consent_checked_at_send_time(
    outside: Outside, space: Space
) -> None:
    """Hard case 2 for SMS: a contact who withdrew SMS consent, or was suppressed on SMS, while
    waiting gets nothing; one who only unsubscribed from e-mail still gets the text."""
    ws = space.workspace_id
    sms = outside.sms()
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    await sms_funnel(outside, ws, days=1)
    rt = outside.runtime
    withdrawn = await contact(rt, ws, "a@example.com", phone="+4915100000001")
    suppressed = await contact(rt, ws, "b@example.com", phone="+4915100000002")
    email_only = await contact(rt, ws, "c@example.com", phone="+4915100000003")
    await outside.drive()
    async with rt.db.write() as uow:
        await uow.session.execute(
            update(Contact).where(Contact.id == withdrawn).values(consent={"sms": "withdrawn"})
        )
        await uow.session.execute(
            update(Contact).where(Contact.id == suppressed).values(suppressed={"sms": "STOP"})
        )
        await uow.session.execute(
            update(Contact)
            .where(Contact.id == email_only)
            .values(suppressed={"email": "unsubscribed"})
        )
    await outside.advance(days=1)
    assert [m["to"] for m in sms.messages.values()] == ["+4915100000003"]
    by_contact = {e.contact_id: e.status for e in await effects(rt)}
    assert by_contact == {
        withdrawn: OUTBOX_SKIPPED,
        suppressed: OUTBOX_SKIPPED,
        email_only: OUTBOX_SENT,
    }
    assert await count(rt, DeliveryEvent, DeliveryEvent.kind == "suppressed") == 2


async def test_transient_failure_retried_after_retry_after(outside: Outside, space: Space) -> None:
    """A 429 with ``Retry-After: 600`` defers the effect by ten minutes (not the 60 s backoff);
    it is retried then, with the same key, and sent once."""
    ws = space.workspace_id
    sms = outside.sms()
    sms.state.inject("messages.create", status=429, headers={"Retry-After": "600"})
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com", phone="+4915112345678")
    started = outside.clock.now()
    await outside.drive()
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_PENDING
    assert effect.next_attempt_at == started + timedelta(seconds=600)
    assert "429" in (effect.last_error or "")
    await outside.advance(seconds=599)
    assert sms.state.count("messages.create") == 1
    await outside.advance(seconds=1)
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert len(sms.messages) == 1


async def test_permanent_sms_failure_recorded(outside: Outside, space: Space) -> None:
    """An invalid number is refused for good: the row is failed, the delivery event says why,
    and the run, which had reached the end of the graph, ends ``failed``, not ``completed``."""
    ws = space.workspace_id
    outside.sms()
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    funnel_id = await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com", phone="12345")
    await outside.drive()
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_FAILED
    assert "422" in (effect.last_error or "")
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason, run.current_node) == (RUN_FAILED, "sms_failed", "text")
    assert "422" in (run.last_error or "")
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert step.node_id == "text"
    assert step.decision.startswith("not delivered: ")
    assert await count(outside.runtime, DeliveryEvent, DeliveryEvent.kind == "failed") == 1


async def test_sms_without_phone_fails_the_run(outside: Outside, space: Space) -> None:
    """Nothing is queued for a contact without a phone number, and the run says why it ended."""
    ws = space.workspace_id
    funnel_id = await sms_funnel(outside, ws)
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason) == (RUN_FAILED, "sms_failed")
    [step] = await steps_of(outside.runtime, run.id)
    assert step.decision == "failed: the contact has no phone number (phone empty)"
    assert await effects(outside.runtime) == []


async def test_send_push_exactly_once(outside: Outside, space: Space) -> None:
    """send_push to the token in the contact's ``push_token`` field, once despite a redelivery;
    a contact who withdrew push consent gets nothing."""
    ws = space.workspace_id
    push = outside.push()
    await setup_names(outside.runtime, ws, fields={"push_token": "text"})
    await outside.provider(ws, "push", shape="json", secret="push-sandbox-key")
    await published(
        outside.runtime,
        ws,
        graph(
            node("send_push", "p", title="Hi {{first_name}}", body="New arrivals"), triggers=CREATED
        ),
    )
    await contact(
        outside.runtime, ws, "a@example.com", first_name="Ada", fields={"push_token": "tok-ada"}
    )
    await contact(
        outside.runtime,
        ws,
        "b@example.com",
        fields={"push_token": "tok-bob"},
        consent={"push": "withdrawn"},
    )
    await outside.drive(deliver=False)
    assert await outside.crash_after_send() == 2
    assert [(n["to"], n["title"]) for n in push.notifications.values()] == [("tok-ada", "Hi Ada")]


async def test_send_letter_exactly_once(outside: Outside, space: Space) -> None:
    """send_letter to the contact's postal address fields, once despite a redelivery."""
    ws = space.workspace_id
    letters = outside.letter()
    fields = {
        name: "text"
        for name in ("address_line1", "address_city", "address_postal_code", "address_country")
    }
    await setup_names(outside.runtime, ws, fields=fields)
    await outside.provider(ws, "letter", shape="json", secret="letter-sandbox-key")
    await published(
        outside.runtime,
        ws,
        graph(node("send_letter", "l", body="<p>Dear {{first_name}}</p>"), triggers=CREATED),
    )
    await contact(
        outside.runtime,
        ws,
        "a@example.com",
        first_name="Ada",
        last_name="Lovelace",
        fields={
            "address_line1": "12 St James's Square",
            "address_city": "London",
            "address_postal_code": "SW1Y 4JH",
            "address_country": "gb",
        },
    )
    await outside.drive(deliver=False)
    await outside.crash_after_send()
    [letter] = letters.letters.values()
    assert letter["to"]["name"] == "Ada Lovelace"
    assert letter["to"]["country"] == "GB"
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert effect.payload["content"] == "<p>Dear Ada</p>"


async def test_notify_team_mails_members_only_once(outside: Outside, tenant: Tenant) -> None:
    """notify_team e-mails the workspace's members (``@admins`` here), never an outsider named
    in ``to``, and a redelivery of a finished effect does not mail them again."""
    ws = tenant.workspace_id
    await published(
        outside.runtime,
        ws,
        graph(
            node(
                "notify_team",
                "tell",
                to=["@admins", "stranger@elsewhere.example"],
                subject="New lead: {{first_name}}",
                body="{{email}} just signed up.",
            ),
            triggers=CREATED,
        ),
    )
    await contact(outside.runtime, ws, "lead@example.com", first_name="Lee")
    await outside.drive(deliver=False)
    await outside.crash_after_send()
    [message] = outside.sink.messages
    assert message.subject == "New lead: Lee"
    assert message.to == [tenant.email]
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_SENT
    assert effect.channel == "team"
