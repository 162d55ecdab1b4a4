"""A message that cannot go out never leaves its run ``completed``: the run takes the node's
``on_failure`` branch or ends ``failed`` with the reason, whether the failure is known when the
node runs (a push without a token, a letter without an address) or only when the provider
refuses it, while the run waits further on or after it reached the end. The funnel report and
status show it. Real database, loopback simulators, mail into aiosmtpd."""

from __future__ import annotations

from app.engines.funnels.models import (
    OUTBOX_CANCELLED,
    OUTBOX_FAILED,
    RUN_ACTIVE,
    RUN_COMPLETED,
    RUN_FAILED,
)
from app.engines.funnels.runs.records.reports import funnel_report
from tests.engines.funnels.factories import (
    Space,
    effects,
    email_node,
    graph,
    node,
    published,
    runs_of,
    setup_names,
    steps_of,
)
from tests.engines.funnels.factories import contact as new_contact
from tests.engines.funnels.outside.conftest import Outside

CREATED = [{"kind": "contact_created"}]
ADDRESS = {
    name: "text"
    for name in ("address_line1", "address_city", "address_postal_code", "address_country")
}


async def test_push_without_a_token_fails_the_run_and_the_report_shows_it(
    outside: Outside, space: Space
) -> None:
    ws = space.workspace_id
    outside.push()
    await setup_names(outside.runtime, ws, fields={"push_token": "text"})
    await outside.provider(ws, "push", shape="json", secret="push-sandbox-key")
    funnel_id, _ = await published(
        outside.runtime,
        ws,
        graph(
            node("send_push", "p", title="Hi", body="New arrivals", next="after"),
            email_node("after"),
            triggers=CREATED,
        ),
    )
    await new_contact(outside.runtime, ws, "a@example.com")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason, run.current_node) == (RUN_FAILED, "push_failed", "p")
    [step] = await steps_of(outside.runtime, run.id)
    assert step.decision == (
        "failed: the contact has no device token in 'push_token' (push_token empty)"
    )
    assert step.output["missing"] == ["push_token"]
    # FN-7 as the README documents it: the run holds the step's error in last_error.
    assert run.last_error == "the contact has no device token in 'push_token' (push_token empty)"
    assert await effects(outside.runtime) == []
    assert outside.sink.messages == []  # the later message is not sent either
    async with outside.runtime.db.read() as s:
        report = await funnel_report(s, funnel_id)
    assert report.runs.get("failed") == 1
    assert report.runs.get("completed", 0) == 0
    [version] = report.versions
    push = next(n for n in version.nodes if n.node_id == "p")
    assert (push.entered, push.exited) == (1, 1)


async def test_letter_without_an_address_takes_the_failure_branch(
    outside: Outside, space: Space
) -> None:
    ws = space.workspace_id
    letters = outside.letter()
    await setup_names(outside.runtime, ws, fields=ADDRESS)
    await outside.provider(ws, "letter", shape="json", secret="letter-sandbox-key")
    funnel_id, _ = await published(
        outside.runtime,
        ws,
        graph(
            node("send_letter", "l", body="Dear {{first_name}}", on_failure="mail"),
            email_node("mail", subject="We could not post your letter"),
            triggers=CREATED,
        ),
    )
    await new_contact(outside.runtime, ws, "a@example.com", fields={"address_line1": "1 Main St"})
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason) == (RUN_COMPLETED, "completed")
    first, second = await steps_of(outside.runtime, run.id)
    assert (first.node_id, second.node_id) == ("l", "mail")
    assert "continues at mail" in first.decision
    assert "address_city" in first.output["missing"]
    assert letters.letters == {}
    [sent] = outside.sink.messages
    assert sent.subject == "We could not post your letter"


async def sms_setup(outside: Outside, ws: int, *nodes: dict) -> int:
    outside.sms()
    await outside.provider(ws, "sms", shape="json", secret="sms-sandbox-key")
    funnel_id, _ = await published(outside.runtime, ws, graph(*nodes, triggers=CREATED))
    await new_contact(outside.runtime, ws, "ada@example.com", phone="12345")  # refused: 422
    return funnel_id


async def test_refused_at_send_time_after_the_run_completed_takes_the_branch(
    outside: Outside, space: Space
) -> None:
    """The run had reached the end of the graph when the provider refused the SMS: it goes back
    into the funnel at the branch, and the mail there goes out."""
    ws = space.workspace_id
    funnel_id = await sms_setup(
        outside,
        ws,
        node("send_sms", "text", text="Your code", on_failure="mail"),
        email_node("mail", subject="Your code by mail"),
    )
    await outside.drive(deliver=False)
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED  # for now: the SMS is still in the outbox
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason) == (RUN_COMPLETED, "completed")
    steps = await steps_of(outside.runtime, run.id)
    assert [s.node_id for s in steps] == ["text", "text", "mail"]
    assert steps[1].output["on_failure"] == "mail"
    [sms, mail] = await effects(outside.runtime)
    assert (sms.status, mail.status) == (OUTBOX_FAILED, "sent")
    [sent] = outside.sink.messages
    assert sent.subject == "Your code by mail"


async def test_refused_while_the_run_waits_ends_it_and_cancels_the_rest(
    outside: Outside, space: Space
) -> None:
    """Without a branch, a run waiting after the refused SMS ends ``failed`` at once: its wait is
    over and what it had queued meanwhile is cancelled."""
    ws = space.workspace_id
    funnel_id = await sms_setup(
        outside,
        ws,
        node("send_sms", "text", text="Your code", next="later"),
        node("quiet_hours", "later", start_hour=0, end_hour=23, next="mail"),
        email_node("mail", subject="Reminder", next="w"),
        node("wait", "w", days=3, next="end"),
        email_node("end", subject="Last call"),
    )
    await outside.drive(deliver=False)
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.current_node) == (RUN_ACTIVE, "w")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert (run.status, run.exit_reason, run.current_node) == (RUN_FAILED, "sms_failed", "text")
    assert run.last_error  # the provider's refusal, as on the step (FN-7)
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert step.output["error"] == run.last_error
    assert "wait" not in run.context
    sms, mail = await effects(outside.runtime)
    assert (sms.status, mail.status) == (OUTBOX_FAILED, OUTBOX_CANCELLED)
    await outside.advance(days=4)
    assert outside.sink.messages == []
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED


async def test_publishing_needs_the_fields_the_channels_read(
    outside: Outside, space: Space
) -> None:
    """FN-26 ``channel_field`` at publish: a push node needs the push provider's token field
    defined as a text field, a letter node the ``address_*`` fields; nothing is published
    until they exist."""
    import pytest

    from app.engines.funnels.errors import InvalidGraph

    ws = space.workspace_id
    outside.push()
    await outside.provider(
        ws, "push", shape="json", secret="push-sandbox-key", options={"token_field": "device"}
    )
    push = graph(node("send_push", "p", title="Hi", body="News"), triggers=CREATED)
    await setup_names(outside.runtime, ws, fields={"push_token": "text"})
    with pytest.raises(InvalidGraph) as refused:
        await published(outside.runtime, ws, push)
    [problem] = refused.value.details
    assert (problem["node_id"], problem["code"]) == ("p", "channel_field")
    assert "'device'" in problem["message"]
    await setup_names(outside.runtime, ws, fields={"device": "text"})
    await published(outside.runtime, ws, push)

    letter = graph(node("send_letter", "l", body="Dear"), triggers=CREATED)
    with pytest.raises(InvalidGraph):
        await published(outside.runtime, ws, letter, name="Letters")
    await setup_names(outside.runtime, ws, fields=ADDRESS)
    await published(outside.runtime, ws, letter, name="Letters")
