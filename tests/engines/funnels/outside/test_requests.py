"""http_request, create_payment, book_slot and ai_generate: outbox effects whose answer the run
waits for and keeps in its context (FN-7), with the SSRF guard, the AI quota and the AI cache."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from app.engines.funnels.models import (
    OUTBOX_FAILED,
    RUN_COMPLETED,
    RUN_FAILED,
    DeliveryEvent,
    OutboxEffect,
)
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside.models import AiUsage
from app.platform.models import Workspace
from tests.engines.funnels.factories import (
    Space,
    contact,
    content,
    count,
    effects,
    graph,
    node,
    published,
    runs_of,
    steps_of,
)
from tests.engines.funnels.outside.conftest import Outside

CREATED = [{"kind": "contact_created"}]


async def allow_private(outside: Outside, ws: int) -> None:
    async with outside.runtime.db.write() as uow:
        await uow.session.execute(
            update(Workspace).where(Workspace.id == ws).values(allow_private_http=True)
        )


def http_funnel(url: str) -> dict[str, Any]:
    return graph(
        node(
            "http_request",
            "call",
            url=url,
            method="POST",
            headers={"X-Token": "t-{{first_name}}"},
            body='{"email": "{{email}}"}',
            next="after",
        ),
        node("send_email", "after", subject="Thanks {{first_name}}", body="Done."),
        triggers=CREATED,
    )


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:{port}/hook",
        "http://localhost:{port}/hook",
    ],
    ids=["loopback", "private", "link-local-metadata", "ipv6-loopback", "name-resolving-loopback"],
)
async def test_http_request_refuses_private_targets(
    outside: Outside, space: Space, target: str
) -> None:
    """§9 SSRF: a private, loopback or link-local target — literal or a name resolving to one —
    is refused at send time; the step records the refusal, the run stops, nothing is sent."""
    outside.guard.allow_private = False  # as in production: the operator allows none
    ws = space.workspace_id
    echo = outside.echo()
    port = outside.sims.urls["echo"].rsplit(":", 1)[1]
    funnel_id, _ = await published(outside.runtime, ws, http_funnel(target.format(port=port)))
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada")
    await outside.drive()
    assert echo.state.count() == 0
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
    assert run.exit_reason == "http_failed"
    steps = await steps_of(outside.runtime, run.id)
    assert [s.node_id for s in steps] == ["call", "call"]
    assert "private or local targets are not allowed" in steps[-1].decision
    assert steps[-1].output["code"] == "target_refused"
    # The run holds the step's error (FN-7, README: "the error in last_error").
    assert run.last_error == steps[-1].output["error"]
    assert "private or local targets are not allowed" in (run.last_error or "")
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_FAILED
    assert outside.sink.messages == []  # the send after it never happened


async def test_http_request_allowed_when_workspace_allows_private(
    outside: Outside, space: Space
) -> None:
    """With ``allow_private_http`` the same loopback call goes out once (merge variables in the
    headers and body) and its response is kept in the run's context for later nodes."""
    ws = space.workspace_id
    echo = outside.echo()
    await allow_private(outside, ws)
    funnel_id, _ = await published(
        outside.runtime, ws, http_funnel(outside.sims.urls["echo"] + "/hook")
    )
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada")
    await outside.drive(deliver=False)
    await outside.crash_after_send()
    assert len(echo.received) == 1
    assert echo.received[0]["body"] == '{"email": "ada@example.com"}'
    assert echo.received[0]["token"] == "t-Ada"
    assert echo.received[0]["idempotency_key"].startswith("run-")
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED
    stored = run.context["http"]["call"]
    assert stored["status"] == 201
    assert stored["data"]["score"] == 42
    assert [m.subject for m in outside.sink.messages] == ["Thanks Ada"]


async def test_http_request_response_size_limit(outside: Outside, space: Space) -> None:
    """A response larger than the workspace's limit is refused and recorded."""
    ws = space.workspace_id
    outside.echo()
    await allow_private(outside, ws)
    await outside.provider(
        ws, "http", shape="guarded", secret=None, options={"max_response_bytes": 20}, url=""
    )
    funnel_id, _ = await published(
        outside.runtime, ws, http_funnel(outside.sims.urls["echo"] + "/hook")
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert step.output["code"] == "response_too_large"


async def test_http_request_transient_failure_retried(outside: Outside, space: Space) -> None:
    """A 503 defers the effect (backoff), the run keeps waiting; the retry succeeds and the run
    continues with the answer."""
    ws = space.workspace_id
    echo = outside.echo()
    echo.state.inject("echo", status=503)
    await allow_private(outside, ws)
    funnel_id, _ = await published(
        outside.runtime, ws, http_funnel(outside.sims.urls["echo"] + "/hook")
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.current_node == "call"
    assert await count(outside.runtime, DeliveryEvent, DeliveryEvent.kind == "deferred") == 1
    await outside.advance(seconds=60)
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED
    assert len(echo.received) == 1


async def test_create_payment_exactly_once(outside: Outside, space: Space) -> None:
    """create_payment on the workspace's own key: one Checkout session despite a redelivery, its
    id and URL kept in the run's context."""
    ws = space.workspace_id
    payments = outside.payments()
    await outside.provider(
        ws,
        "payments",
        shape="stripe",
        secret="sk_test_sandbox",
        options={"success_url": "https://shop.example/thanks"},
    )
    funnel_id, _ = await published(
        outside.runtime,
        ws,
        graph(
            node(
                "create_payment",
                "pay",
                amount_minor=4900,
                currency="EUR",
                description="Course for {{first_name}}",
            ),
            triggers=CREATED,
        ),
    )
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada")
    await outside.drive(deliver=False)
    await outside.crash_after_send()
    [session] = payments.checkout_sessions.values()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED
    stored = run.context["payments"]["pay"]
    assert stored["payment_id"] == session["id"]
    assert stored["url"] == session["url"]


async def test_create_payment_lost_reply_replayed(outside: Outside, space: Space) -> None:
    """The provider created the PaymentIntent but the reply was lost: the retry with the same
    key gets the same object back, so nothing is charged twice."""
    ws = space.workspace_id
    payments = outside.payments()
    payments.lost.arm(1, status=502)
    await outside.provider(ws, "payments", shape="stripe", secret="sk_test_sandbox")
    funnel_id, _ = await published(
        outside.runtime,
        ws,
        graph(node("create_payment", "pay", amount_minor=900, currency="usd"), triggers=CREATED),
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    await outside.advance(seconds=61)
    assert len(payments.payment_intents) == 1
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.context["payments"]["pay"]["payment_id"] in payments.payment_intents


async def test_book_slot_exactly_once(outside: Outside, space: Space) -> None:
    """book_slot books the first free slot once despite a redelivery; the booking is kept in the
    run's context."""
    ws = space.workspace_id
    booking = outside.booking()
    first = outside.clock.now() + timedelta(days=1)
    booking.add_slots("demo", first, 3)
    await outside.provider(ws, "booking", shape="json", secret="booking-sandbox-key")
    funnel_id, _ = await published(
        outside.runtime, ws, graph(node("book_slot", "book", resource="demo"), triggers=CREATED)
    )
    await contact(outside.runtime, ws, "ada@example.com", first_name="Ada")
    await outside.drive(deliver=False)
    await outside.crash_after_send()
    [made] = booking.bookings.values()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED
    assert run.context["bookings"]["book"]["booking_id"] == made["id"]
    assert run.context["bookings"]["book"]["start"] == first.isoformat()


async def test_book_slot_none_free_ends_run(outside: Outside, space: Space) -> None:
    """No free slot is a permanent failure: recorded on the step, the run ends as failed."""
    ws = space.workspace_id
    booking = outside.booking()
    [slot] = booking.add_slots("demo", outside.clock.now() + timedelta(days=1), 1)
    booking.take_slot("demo", slot, "bk_someone_else")
    await outside.provider(ws, "booking", shape="json", secret="booking-sandbox-key")
    funnel_id, _ = await published(
        outside.runtime, ws, graph(node("book_slot", "book", resource="demo"), triggers=CREATED)
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
    assert run.exit_reason == "booking_failed"
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert step.output["code"] == "no_slot_available"
    assert run.last_error == step.output["error"]  # FN-7: the step's error on the run


def ai_funnel() -> dict[str, Any]:
    return graph(
        node(
            "ai_generate",
            "gen",
            prompt="Write one line welcoming someone from {{company}}.",
            variable="opener",
            next="mail",
        ),
        node("send_email", "mail", subject="Hello", body="{{opener}}"),
        triggers=CREATED,
    )


async def ai_setup(outside: Outside, ws: int) -> None:
    from tests.engines.funnels.factories import setup_names

    await setup_names(outside.runtime, ws, fields={"company": "text"})
    await outside.provider(
        ws, "ai", shape="openai", secret="sk-sandbox-ai", options={"max_tokens": 50}
    )


async def test_ai_generate_fills_variable_and_cache_hit_is_free(
    outside: Outside, space: Space
) -> None:
    """ai_generate: the generated text fills ``{{opener}}`` in the next e-mail; a second contact
    with the same attribute values is served from the cache: no provider call, no quota used."""
    ws = space.workspace_id
    ai = outside.ai()
    await ai_setup(outside, ws)
    funnel_id, _ = await published(outside.runtime, ws, ai_funnel())
    await contact(outside.runtime, ws, "a@example.com", fields={"company": "Acme"})
    await outside.drive(deliver=False)
    await outside.crash_after_send()  # a redelivery does not generate again either
    assert ai.state.count("chat.completions") == 1
    [first] = outside.sink.messages
    generated = ai.completions[0]["choices"][0]["message"]["content"]
    assert content(first.body) == generated
    async with outside.runtime.db.read() as s:
        org = await s.scalar(select(Workspace.organisation_id).where(Workspace.id == ws))
        assert org is not None
        used = (await ai_ledger.quota_of(s, org, outside.clock.now())).used_tokens
    assert used == ai.tokens_billed > 0

    await contact(outside.runtime, ws, "b@example.com", fields={"company": "Acme"})
    await outside.drive()
    assert ai.state.count("chat.completions") == 1  # cache hit: no call
    async with outside.runtime.db.read() as s:
        assert (await ai_ledger.quota_of(s, org, outside.clock.now())).used_tokens == used
    runs = await runs_of(outside.runtime, funnel_id)
    assert [r.status for r in runs] == [RUN_COMPLETED, RUN_COMPLETED]
    assert runs[1].context["vars"]["opener"] == runs[0].context["vars"]["opener"]
    [*_, cached_step] = [
        s for s in await steps_of(outside.runtime, runs[1].id) if s.node_id == "gen"
    ]
    assert cached_step.output == {"cached": True}
    assert len(outside.sink.messages) == 2


async def _org_usage(outside: Outside, ws: int) -> tuple[int, list[AiUsage]]:
    async with outside.runtime.db.read() as s:
        org = await s.scalar(select(Workspace.organisation_id).where(Workspace.id == ws))
        assert org is not None
        used = (await ai_ledger.quota_of(s, org, outside.clock.now())).used_tokens
        lines = list(await s.scalars(select(AiUsage).order_by(AiUsage.id)))
    return used, lines


async def test_ai_lost_reply_and_its_retry_are_both_counted(outside: Outside, space: Space) -> None:
    """PL-4: the provider billed a completion whose reply was lost (a 502 after the model ran);
    the retry calls it again. Both billed calls are in the quota: the lost one at its
    reservation (the call's upper bound: its real cost never reached us), the retry at its
    real cost, each with its ledger line, so the quota never counts less than was billed."""
    ws = space.workspace_id
    ai = outside.ai()
    ai.lost.arm(1, status=502)
    await ai_setup(outside, ws)
    funnel_id, _ = await published(outside.runtime, ws, ai_funnel())
    await contact(outside.runtime, ws, "a@example.com", fields={"company": "Acme"})
    await outside.drive()
    assert len(ai.completions) == 1  # billed, reply lost
    used, [lost] = await _org_usage(outside, ws)
    assert (lost.outcome, lost.tokens) == ("lost", used)
    assert used >= ai.tokens_billed > 0

    await outside.advance(seconds=61)
    assert len(ai.completions) == 2  # the retry was billed again
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_COMPLETED
    used, lines = await _org_usage(outside, ws)
    assert [line.outcome for line in lines] == ["lost", "generated"]
    retried = ai.completions[1]["usage"]["total_tokens"]
    assert lines[1].tokens == retried
    assert used == lines[0].tokens + retried == sum(line.tokens for line in lines)
    assert used >= ai.tokens_billed


async def test_ai_call_refused_by_the_provider_is_not_counted(
    outside: Outside, space: Space
) -> None:
    """A 429 rate limit means the model did not run: nothing billed, the reservation is given
    back and only the retry's real cost is counted."""
    ws = space.workspace_id
    ai = outside.ai()
    ai.state.inject("chat.completions", status=429)
    await ai_setup(outside, ws)
    await published(outside.runtime, ws, ai_funnel())
    await contact(outside.runtime, ws, "a@example.com", fields={"company": "Acme"})
    await outside.drive()
    used, lines = await _org_usage(outside, ws)
    assert (used, lines, ai.completions) == (0, [], [])
    await outside.advance(seconds=61)
    used, [line] = await _org_usage(outside, ws)
    assert line.outcome == "generated"
    assert used == line.tokens == ai.tokens_billed > 0


async def test_ai_generate_quota_exhaustion_recorded(outside: Outside, space: Space) -> None:
    """When the organisation's quota cannot cover a generation, no call is made, the refusal is
    in the usage ledger, on the delivery events and on the step, and the run stops as failed
    before the message that needed the text."""
    ws = space.workspace_id
    ai = outside.ai()
    await ai_setup(outside, ws)
    async with outside.runtime.db.write() as uow:
        org = await uow.session.scalar(select(Workspace.organisation_id).where(Workspace.id == ws))
        assert org is not None
        await ai_ledger.set_quota(uow.session, org, 30, outside.clock.now())
    funnel_id, _ = await published(outside.runtime, ws, ai_funnel())
    await contact(outside.runtime, ws, "a@example.com", fields={"company": "Acme"})
    await outside.drive()
    assert ai.state.count("chat.completions") == 0
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
    assert run.exit_reason == "ai_quota_exhausted"
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert step.output["code"] == "ai_quota_exhausted"
    assert "AI quota" in step.decision
    assert run.last_error == step.output["error"]  # FN-7: the step's error on the run
    async with outside.runtime.db.read() as s:
        [usage] = list(await s.scalars(select(AiUsage)))
        failed = await s.scalar(select(DeliveryEvent.detail).where(DeliveryEvent.kind == "failed"))
        effect = await s.scalar(select(OutboxEffect))
    assert (usage.outcome, usage.tokens) == ("refused", 0)
    assert "AI quota would_exceed" in (failed or "")
    assert effect is not None
    assert effect.status == OUTBOX_FAILED
    assert outside.sink.messages == []


async def test_ai_quota_is_per_organisation_and_reserved_atomically(
    outside: Outside, space: Space
) -> None:
    """PL-4: reservations against one organisation's quota from concurrent tasks never take it
    past the quota; a failed call gives its reservation back."""
    import asyncio

    db = outside.runtime.db
    now = outside.clock.now()
    async with db.write() as uow:
        org = await uow.session.scalar(
            select(Workspace.organisation_id).where(Workspace.id == space.workspace_id)
        )
        assert org is not None
        await ai_ledger.set_quota(uow.session, org, 1000, now)

    async def take() -> bool:
        async with db.write() as uow:
            return (await ai_ledger.reserve(uow.session, org, 300, now)).allowed

    results = await asyncio.gather(*(take() for _ in range(8)))
    assert results.count(True) == 3
    async with db.write() as uow:
        await ai_ledger.settle(uow.session, org, 300, 0, now)
    async with db.read() as s:
        view = await ai_ledger.quota_of(s, org, now)
    assert (view.used_tokens, view.remaining_tokens) == (600, 400)
    # A new month starts from zero.
    async with db.read() as s:
        later = await ai_ledger.quota_of(s, org, now + timedelta(days=31))
    assert later.used_tokens == 0
    assert await count(outside.runtime, OutboxEffect) == 0


async def test_http_request_retries_exhausted_end_the_run(outside: Outside, space: Space) -> None:
    """A target that keeps failing transiently is retried with backoff until the attempts run out;
    the run waiting on it then ends as failed with the last error (found at its next look)."""
    ws = space.workspace_id
    echo = outside.echo()
    echo.state.inject("echo", status=503, times=-1)
    await allow_private(outside, ws)
    funnel_id, _ = await published(
        outside.runtime, ws, http_funnel(outside.sims.urls["echo"] + "/hook")
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    for delay in (60, 120, 240):  # retry_base_seconds doubled per attempt
        await outside.advance(seconds=delay)
    assert echo.state.count("echo") == 4
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_FAILED
    assert (effect.last_error or "").startswith("gave up")
    await outside.advance(minutes=10)
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
    assert run.exit_reason == "http_failed"
    [*_, step] = await steps_of(outside.runtime, run.id)
    assert "503" in step.output["error"]


async def test_create_payment_to_a_loopback_base_url_is_refused_at_send(
    outside: Outside, space: Space
) -> None:
    """SSRF: a payments base URL on loopback (stored while the operator allowed private
    targets) is refused at connection once they are not allowed: the simulator receives
    nothing, the workspace's secret key never leaves, the effect fails permanently."""
    ws = space.workspace_id
    payments = outside.payments()
    await outside.provider(ws, "payments", shape="stripe", secret="sk_test_sandbox")
    outside.guard.allow_private = False
    funnel_id, _ = await published(
        outside.runtime,
        ws,
        graph(node("create_payment", "pay", amount_minor=900, currency="usd"), triggers=CREATED),
    )
    await contact(outside.runtime, ws, "ada@example.com")
    await outside.drive()
    assert payments.state.count() == 0
    assert payments.payment_intents == {}
    [effect] = await effects(outside.runtime)
    assert effect.status == OUTBOX_FAILED
    [run] = await runs_of(outside.runtime, funnel_id)
    assert run.status == RUN_FAILED
