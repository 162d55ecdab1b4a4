"""Every simulator's ``reset()`` gives back a fresh simulator: no calls counted, no fault left, none
of the data the provider accumulated or a test programmed — and the same request answers exactly
as it did the first time (ids start again, an idempotency key is new again)."""

from __future__ import annotations

import importlib
import pkgutil
import smtplib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from email.message import EmailMessage
from typing import Any

import httpx
import pytest

import app.sandbox
from app.clock import ManualClock
from app.sandbox.ai import AiSandbox
from app.sandbox.base import HttpSimulator, Simulator, simulator_in_loop
from app.sandbox.booking import BookingSandbox
from app.sandbox.chat_webhooks import ChatWebhookSandbox
from app.sandbox.letter import LetterSandbox
from app.sandbox.meta import GraphWorld
from app.sandbox.payments import LostResponses, PaymentsSandbox
from app.sandbox.push import PushSandbox
from app.sandbox.search_console import QueryRow, SearchConsoleSandbox
from app.sandbox.serp import SerpPrices, SerpSimulator
from app.sandbox.sheets import SheetsSandbox
from app.sandbox.sms import SmsSandbox, TwilioSandbox
from app.sandbox.smtp import SmtpSink
from app.sandbox.sns import SnsSandbox

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TWILIO = "AC" + "0" * 32
ADDRESS = {"name": "Ada", "line1": "1 Main St", "city": "Springfield", "postal_code": "12345"}

Call = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


def bearer(key: str, idempotency: str | None = "key-1") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if idempotency:
        headers["Idempotency-Key"] = idempotency
    return headers


@dataclass
class Case:
    """A simulator, what a test programs into it, a call that leaves data behind in it, the fault
    kind of that call and the data a test reads back."""

    build: Callable[[], HttpSimulator]
    program: Callable[[Any], object]
    call: Call
    kind: str
    data: Callable[[Any], object]


def _graph(world: GraphWorld) -> None:
    world.add_account("act_1", "One")
    world.add_campaigns("act_1", 3)
    world.grant("token-1", "act_1")
    world.page_sizes = [1]
    world.null_batch_items = 2
    world.oauth.answer.deny = True
    world.oauth.apps["2"] = ("other-secret", "Other app")
    world.oauth.dialog({"client_id": "2", "redirect_uri": "http://x/cb"}, [])


def _graph_data(world: GraphWorld) -> object:
    return (
        list(world.accounts),
        world.tokens,
        world.page_sizes,
        world.null_batch_items,
        world.list_params,
        world.next_links,
        world.updates,
        world.oauth.codes,
        sorted(world.oauth.apps),
        world.oauth.info,
        world.oauth.answer,
    )


def _payments(sandbox: PaymentsSandbox) -> None:
    sandbox.webhooks.url = "http://127.0.0.1:1/hooks/stripe"
    sandbox.webhooks.roll()


def _serp(sim: SerpSimulator) -> None:
    sim.place("red shoes", "acme.com", 1)
    sim.script("red shoes", queue_polls=2)
    # What a test may set for itself goes back to what the simulator was built with.
    sim.prices = SerpPrices(serp_page_standard=Decimal("0.006"))
    sim.ready_after_polls = 3
    sim.tasks_ready_per_minute = 1
    sim.clock = ManualClock(datetime(2027, 1, 1, tzinfo=UTC))


def _serp_data(sim: SerpSimulator) -> object:
    return (
        sim.tasks_posted,
        sim.total_cost,
        sim.funds,
        sim.ranking("red shoes", "desktop", 2840, "en"),
        sim.prices,
        sim.ready_after_polls,
        sim.tasks_ready_per_minute,
        sim.clock.now(),
    )


CASES: dict[str, Case] = {
    "sms": Case(
        SmsSandbox,
        lambda s: None,
        lambda h: h.post(
            "/v1/messages",
            json={"to": "+15551234567", "body": "hi"},
            headers=bearer("sms-sandbox-key"),
        ),
        "messages.create",
        lambda s: (s.records, len(s.ledger), s.lost.remaining),
    ),
    "push": Case(
        lambda: PushSandbox(unregistered_tokens={"gone-device"}),
        lambda s: s.unregistered_tokens.add("dead-device"),
        lambda h: h.post(
            "/v1/notifications",
            json={"to": "device-1", "title": "Hi", "body": "there"},
            headers=bearer("push-sandbox-key"),
        ),
        "notifications.create",
        lambda s: (s.records, len(s.ledger), s.unregistered_tokens),
    ),
    "letter": Case(
        lambda: LetterSandbox(clock=ManualClock(NOW)),
        lambda s: None,
        lambda h: h.post(
            "/v1/letters",
            json={"to": {**ADDRESS, "country": "US"}, "content": "<p>Hello</p>"},
            headers=bearer("letter-sandbox-key"),
        ),
        "letters.create",
        lambda s: (s.records, len(s.ledger)),
    ),
    "booking": Case(
        BookingSandbox,
        lambda s: s.add_slots("room", NOW, 2),
        lambda h: h.post(
            "/v1/resources/room/bookings",
            json={
                "slot_id": f"slot_room_{int(NOW.timestamp())}",
                "attendee": {"name": "Ada", "email": "ada@example.com"},
            },
            headers=bearer("booking-sandbox-key"),
        ),
        "bookings.create",
        lambda s: (s.records, s.slots, len(s.ledger)),
    ),
    "payments": Case(
        lambda: PaymentsSandbox(clock=ManualClock(NOW)),
        _payments,
        lambda h: h.post(
            "/v1/payment_intents",
            data={"amount": "1200", "currency": "eur"},
            headers=bearer("sk_test_sandbox"),
        ),
        "payment_intents.create",
        lambda s: (
            s.payment_intents,
            s.checkout_sessions,
            len(s.ledger),
            s.webhooks.url,
            len(s.webhooks.secrets),
        ),
    ),
    "twilio": Case(
        lambda: TwilioSandbox(clock=ManualClock(NOW)),
        lambda s: None,
        lambda h: h.post(
            f"/2010-04-01/Accounts/{TWILIO}/Messages.json",
            data={"To": "+15551234567", "From": "+15005550006", "Body": "hi"},
            auth=(TWILIO, "sandbox-twilio-token"),
        ),
        "messages.create",
        lambda s: s.messages,
    ),
    "ai": Case(
        lambda: AiSandbox(clock=ManualClock(NOW), quota_tokens=50_000),
        lambda s: setattr(s, "quota_tokens", 10_000),
        lambda h: h.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]},
            headers=bearer("sk-sandbox-ai", idempotency=None),
        ),
        "chat.completions",
        lambda s: (s.quota_tokens, s.tokens_billed, s.completions, s.lost.remaining),
    ),
    "sheets": Case(
        SheetsSandbox,
        lambda s: (s.put_sheet("sheet-1", "Plan", [["a", 1]]), s.new_service_account("x@y.z")),
        lambda h: h.get("/v4/spreadsheets/sheet-1/values/Plan?key=sandbox-sheets-key"),
        "values.get",
        lambda s: (s.spreadsheets, list(s.service_accounts), s.minted, s.bearer_tokens),
    ),
    "search_console": Case(
        SearchConsoleSandbox,
        lambda s: (
            s.add_property("sc-domain:example.com"),
            s.add_rows("sc-domain:example.com", [QueryRow("shoes", "2026-03-01", 3, 40, 4.5)]),
            s.google.token_scopes.update({"gsc-token": "webmasters.readonly"}),
        ),
        lambda h: h.get("/webmasters/v3/sites", headers=bearer("gsc-token", idempotency=None)),
        "sites.list",
        lambda s: (s.properties, s.rows),
    ),
    "sns": Case(
        SnsSandbox,
        lambda s: None,
        lambda h: h.get("/?Action=ConfirmSubscription&Token=token-1"),
        "action.ConfirmSubscription",
        lambda s: s.confirmed,
    ),
    "meta": Case(
        GraphWorld,
        _graph,
        lambda h: h.get("/v21.0/act_1/campaigns?access_token=token-1&fields=name"),
        "campaigns.list",
        _graph_data,
    ),
    "chat": Case(
        ChatWebhookSandbox,
        lambda s: s.removed.add("T0009/B0009/removed"),
        lambda h: h.post("/services/T0001/B0001/abcdefghijklmnopqrstuvwx", json={"text": "hi"}),
        "slack.post",
        lambda s: (s.received, s.removed),
    ),
    "serp": Case(
        lambda: SerpSimulator(
            seed=4, login="l", password="p", funds=Decimal(5), clock=ManualClock(NOW)
        ),
        _serp,
        lambda h: h.post(
            "/v3/serp/google/organic/task_post",
            json=[{"keyword": "red shoes", "location_code": 2840, "language_code": "en"}],
            auth=("l", "p"),
        ),
        "serp.task_post",
        _serp_data,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_reset_gives_back_a_fresh_simulator(name: str) -> None:
    case = CASES[name]
    simulator = case.build()
    fresh = case.data(case.build())
    async with simulator_in_loop(simulator) as url, httpx.AsyncClient(base_url=url) as http:
        case.program(simulator)
        first = await case.call(http)
        assert first.is_success, first.text
        assert simulator.count(case.kind) == simulator.count() == 1
        assert case.data(simulator) != fresh, "the call and the programming left nothing behind"
        simulator.inject(case.kind, status=503, times=-1)
        if isinstance(lost := getattr(simulator, "lost", None), LostResponses):
            lost.arm(3)  # replies lost after the effect, for the providers that lose them
        assert (await case.call(http)).status_code == 503

        simulator.reset()

        assert (simulator.count(), simulator.state.faults, simulator.state.log) == (0, [], [])
        assert case.data(simulator) == fresh
        case.program(simulator)
        again = await case.call(http)
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert "idempotent-replayed" not in again.headers


def test_every_simulator_is_covered() -> None:
    """A new simulator joins the harness and this test (the sink is tested below)."""
    for module in pkgutil.walk_packages(app.sandbox.__path__, "app.sandbox."):
        importlib.import_module(module.name)
    covered = {type(case.build()) for case in CASES.values()} | {SmtpSink}
    assert _all_simulators() <= covered


def _all_simulators() -> set[type[Simulator]]:
    found: set[type[Simulator]] = set()
    todo = list(Simulator.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if not getattr(cls, "__abstractmethods__", None) and cls.__module__.startswith("app."):
            found.add(cls)
    return found


def _send(sink: SmtpSink, subject: str) -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", subject
    message.set_content("Hello")
    with smtplib.SMTP(sink.host, sink.port) as smtp:
        smtp.send_message(message)


def test_the_smtp_sink_resets_its_mailbox_counts_faults_and_delay() -> None:
    with SmtpSink() as sink:
        _send(sink, "first")
        sink.inject("data", status=451, times=-1)
        sink.slow_down(0.01)
        with pytest.raises(smtplib.SMTPDataError) as refused:
            _send(sink, "refused")
        assert refused.value.smtp_code == 451
        assert (sink.count("data"), [m.subject for m in sink.snapshot()]) == (2, ["first"])

        sink.reset()

        assert (sink.count(), sink.state.faults, sink.snapshot(), sink.delay_seconds) == (
            0,
            [],
            [],
            0.0,
        )
        _send(sink, "again")
        assert [m.subject for m in sink.snapshot()] == ["again"]
