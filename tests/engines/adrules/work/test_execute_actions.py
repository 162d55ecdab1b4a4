"""The 11 actions as the Graph API simulator, the SMTP sink and a webhook receiver see them
(AR-17, AR-21): writes, clamps at the boundary, live re-reads, cooldown skips, once in a lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from litestar import Litestar, Request, post
from sqlalchemy import select, update

from app.engines.adrules.notify_models import Digest as DigestRow
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    Action,
    ActivateCampaign,
    AppendToName,
    DecreaseBudget,
    IncreaseBudget,
    LogOnly,
    MetricValueCondition,
    NotifyEmail,
    NotifyWebhook,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBudget,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.execute import SIGNATURE_HEADER, verify_webhook
from app.integrations.mail import MailSender
from app.platform.models import Workspace
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.meta import GraphWorld, SimCampaign
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)
from tests.harness.clock import manual_clock

ALWAYS = MetricValueCondition(metric="impressions", operator="gte", value=Decimal(0))


@pytest.fixture
def workspace_id(ws: Any) -> int:
    return int(ws.workspace_id)


@pytest.fixture
async def graph(world: GraphWorld) -> AsyncIterator[tuple[GraphWorld, Clients]]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.add_account("act_2002", "Tokyo", currency="JPY", timezone_name="Asia/Tokyo")
    world.grant(JOB_TOKEN, "act_1001", "act_2002")
    clients = make_clients(world.base_url)
    yield world, clients
    await clients.aclose()


async def _run(
    runtime: Runtime,
    workspace_id: int,
    clients: Clients,
    world: GraphWorld,
    action: Action,
    *,
    account: str = "act_1001",
    currency: str = "USD",
    cooldown: str = "15m",
    mail: MailSender | None = None,
    before_run: Any = None,
) -> list[ExecutionRecord]:
    setup = await create_setup(
        runtime,
        workspace_id,
        tasks=[TaskIn(name="t", conditions=[ALWAYS], action=action, cooldown=cooldown)],  # type: ignore[arg-type]
        account_meta_id=account,
        currency=currency,
        rule_name="Scale",
    )
    payload = await make_payload(runtime, setup, entities_from_world(world, account))
    if before_run is not None:
        before_run()
    await run_account_job(make_deps(runtime, clients, mail=mail), payload)
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord)
            .where(ExecutionRecord.batch_id == payload.batch_id)
            .order_by(ExecutionRecord.campaign_id)
        )
        return list(rows.all())


@pytest.mark.parametrize(
    ("action", "start", "expected_write", "after"),
    [
        (PauseCampaign(), {}, {"status": "PAUSED"}, {"status": "PAUSED"}),
        (
            ActivateCampaign(),
            {"effective_status": "PAUSED"},
            {"status": "ACTIVE"},
            {"status": "ACTIVE"},
        ),
        (
            IncreaseBudget(by="percent", amount=Decimal(20), max=Decimal(100)),
            {},
            {"daily_budget": "6000"},
            {"daily_budget": "60.00"},
        ),
        (
            IncreaseBudget(by="amount", amount=Decimal("7.5"), max=Decimal(100)),
            {},
            {"daily_budget": "5750"},
            {"daily_budget": "57.50"},
        ),
        (
            DecreaseBudget(by="percent", amount=Decimal(10), min=Decimal(5)),
            {},
            {"daily_budget": "4500"},
            {"daily_budget": "45.00"},
        ),
        (
            SetBudget(amount=Decimal("12.34")),
            {},
            {"daily_budget": "1234"},
            {"daily_budget": "12.34"},
        ),
        (
            Rename(template="{name} · {rule} · {date}"),
            {},
            {"name": "Spring · Scale · 2026-03-02"},
            {"name": "Spring · Scale · 2026-03-02"},
        ),
        (
            AppendToName(text="WINNER", separator=" | "),
            {},
            {"name": "Spring | WINNER"},
            {"name": "Spring | WINNER"},
        ),
        (
            RemoveFromName(text="TEST", separator=" - "),
            {"name": "Spring - TEST"},
            {"name": "Spring"},
            {"name": "Spring"},
        ),
    ],
    ids=[
        "pause",
        "activate",
        "increase_pct",
        "increase_amount",
        "decrease",
        "set",
        "rename",
        "append",
        "remove",
    ],
)
async def test_each_graph_action_as_the_simulator_sees_it(
    runtime: Runtime,
    workspace_id: int,
    graph: tuple[GraphWorld, Clients],
    action: Action,
    start: dict[str, Any],
    expected_write: dict[str, str],
    after: dict[str, str],
) -> None:
    world, clients = graph
    world.add_campaign(
        "act_1001", SimCampaign(id="777", **{"name": "Spring", "daily_budget": 5000, **start})
    )
    (record,) = await _run(runtime, workspace_id, clients, world, action)
    assert record.status == "executed", record.reason
    assert world.updates == [("777", expected_write)]
    assert record.after == after


@pytest.mark.parametrize(
    ("action", "expected_minor", "clamped_at"),
    [
        (IncreaseBudget(by="percent", amount=Decimal(50), max=Decimal(60)), "6000", "max"),
        (DecreaseBudget(by="amount", amount=Decimal(40), min=Decimal("15.50")), "1550", "min"),
    ],
)
async def test_ar17_budget_changes_clamp_and_write_the_boundary(
    runtime: Runtime,
    workspace_id: int,
    graph: tuple[GraphWorld, Clients],
    action: Action,
    expected_minor: str,
    clamped_at: str,
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    (record,) = await _run(runtime, workspace_id, clients, world, action)
    assert world.updates == [("777", {"daily_budget": expected_minor})]
    assert record.after is not None
    assert record.after["clamped_at"] == clamped_at
    assert record.before == {"daily_budget": "50.00"}


async def test_budgets_in_a_zero_decimal_currency(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_2002", SimCampaign(id="888", name="Tokyo", daily_budget=3000))
    action = IncreaseBudget(by="percent", amount=Decimal(10), max=Decimal(100000))
    (record,) = await _run(
        runtime, workspace_id, clients, world, action, account="act_2002", currency="JPY"
    )
    assert world.updates == [("888", {"daily_budget": "3300"})]
    assert record.before == {"daily_budget": "3000"}


async def test_ar17_budget_and_name_actions_reread_the_live_value(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    """The simulator's budget and name change between the dispatch and the action: the action
    starts from the new values, not the ones in the job."""
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))

    def someone_edits_the_campaign() -> None:
        world.campaign("777").daily_budget = 8000
        world.campaign("777").name = "Spring v2"

    action = IncreaseBudget(by="percent", amount=Decimal(10), max=Decimal(1000))
    (record,) = await _run(
        runtime, workspace_id, clients, world, action, before_run=someone_edits_the_campaign
    )
    assert world.updates == [("777", {"daily_budget": "8800"})]
    assert record.before == {"daily_budget": "80.00"}
    assert [s["step"] for s in record.steps][-2:] == ["live_read", "write"]

    world.updates.clear()
    (renamed,) = await _run(
        runtime, workspace_id, clients, world, AppendToName(text="X", separator=" ")
    )
    assert world.updates == [("777", {"name": "Spring v2 X"})]
    assert renamed.before == {"name": "Spring v2"}


async def test_ar17_cooldown_skip_record_and_reopening(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    setup = await create_setup(
        runtime,
        workspace_id,
        tasks=[
            TaskIn(
                conditions=[ALWAYS],
                action=IncreaseBudget(amount=Decimal(10), max=Decimal(1000)),
                cooldown="1h",
            )
        ],
    )
    first_at = runtime.clock.now()

    async def run_once() -> ExecutionRecord:
        payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
        await run_account_job(make_deps(runtime, clients), payload)
        async with runtime.db.read() as session:
            return (
                await session.scalars(
                    select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
                )
            ).one()

    first = await run_once()
    assert first.status == "executed"
    assert first.next_permitted_at == first_at + timedelta(hours=1)

    manual_clock(runtime).advance(minutes=15)
    skipped = await run_once()
    assert skipped.status == "skipped"
    assert skipped.reason is not None
    assert "cooldown of 1 hour" in skipped.reason
    assert skipped.next_permitted_at == first_at + timedelta(hours=1)
    assert len(world.updates) == 1  # the skip wrote nothing
    assert skipped.conditions  # the evaluation is still on record

    manual_clock(runtime).advance(minutes=45)
    again = await run_once()
    assert again.status == "executed"
    assert len(world.updates) == 2


async def test_ar17_once_in_a_lifetime(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    setup = await create_setup(
        runtime,
        workspace_id,
        tasks=[TaskIn(conditions=[ALWAYS], action=PauseCampaign(), cooldown="lifetime")],
    )
    statuses = []
    for _ in range(3):
        world.campaign("777").effective_status = "ACTIVE"
        payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
        await run_account_job(make_deps(runtime, clients), payload)
        async with runtime.db.read() as session:
            record = (
                await session.scalars(
                    select(ExecutionRecord).where(ExecutionRecord.batch_id == payload.batch_id)
                )
            ).one()
        statuses.append((record.status, record.next_permitted_at))
        manual_clock(runtime).advance(days=30)
    assert [s for s, _ in statuses] == ["executed", "skipped", "skipped"]
    assert all(n is None for _, n in statuses)  # never again
    assert len(world.updates) == 1


async def test_log_only_changes_nothing(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    world.state.reset_counts()
    (record,) = await _run(runtime, workspace_id, clients, world, LogOnly())
    assert record.status == "executed"
    assert world.updates == []
    assert world.count("campaign.update") == 0
    assert record.before is None
    assert record.after is None


async def test_notify_email_goes_through_smtp(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    sink = SmtpSink().start()
    try:
        mail = MailSender(MailSettings(smtp_host=sink.host, smtp_port=sink.port))
        action = NotifyEmail(recipients=["ops@example.com"], subject="{rule}: {name} on {date}")
        (record,) = await _run(runtime, workspace_id, clients, world, action, mail=mail)
        messages = sink.snapshot()
    finally:
        sink.stop()
    assert record.status == "executed"
    assert len(messages) == 1
    assert messages[0].to == ["ops@example.com"]
    assert messages[0].subject == "Scale: Spring on 2026-03-02"
    # AR-27: the run's digest, one message for the run (the object among its top objects).
    assert "notify email: 1 done" in messages[0].body
    assert "Spring (777)" in messages[0].body
    assert world.updates == []


async def test_notify_webhook_signature_verifies(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    received: list[tuple[bytes, str]] = []

    @post("/hook", status_code=204)
    async def hook(request: Request[Any, Any, Any]) -> None:
        received.append((await request.body(), request.headers.get(SIGNATURE_HEADER, "")))

    async with runtime.db.write() as uow:  # the receiver is on loopback: the workspace allows it
        await uow.session.execute(
            update(Workspace).where(Workspace.id == workspace_id).values(allow_private_http=True)
        )
    secret = "whsec-0123456789abcdef"
    async with serve_in_loop(Litestar([hook])) as url:
        action = NotifyWebhook(url=f"{url}/hook", secret=secret)
        (record,) = await _run(runtime, workspace_id, clients, world, action)
    assert record.status == "executed", record.reason
    # AR-24: the record says a secret exists, never the secret nor its ciphertext.
    assert record.parameters == {"type": "notify_webhook", "url": f"{url}/hook", "has_secret": True}
    (body, signature) = received[0]
    now = int(runtime.clock.now().timestamp())
    assert verify_webhook(secret, signature, body, now=now)
    assert not verify_webhook("another-secret-value", signature, body, now=now)
    assert not verify_webhook(secret, signature, body + b" ", now=now)
    assert not verify_webhook(secret, signature, body, now=now + 3600)  # replayed an hour later
    # AR-27: the run's digest, signed the same way; the object among its top objects.
    assert len(received) == 1
    assert b'"event":"adrules.run_digest"' in body
    assert b'"top":[{"id":"777","name":"Spring"' in body


async def test_a_webhook_to_a_private_address_is_refused_by_default(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="777", name="Spring", daily_budget=5000))
    action = NotifyWebhook(url="http://127.0.0.1:9/hook", secret="whsec-0123456789abcdef")
    (record,) = await _run(runtime, workspace_id, clients, world, action)
    # The object went into the run's digest; the digest itself was refused by the address guard.
    assert record.status == "executed"
    async with runtime.db.read() as session:
        digest = await session.scalar(
            select(DigestRow).where(DigestRow.batch_id == record.batch_id)
        )
    assert digest is not None
    assert digest.status == "failed"
    assert "loopback" in (digest.detail or "")


async def test_a_campaign_on_a_lifetime_budget_gets_its_lifetime_budget_set(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign(
        "act_1001", SimCampaign(id="777", name="Spring", daily_budget=None, lifetime_budget=90000)
    )
    (record,) = await _run(runtime, workspace_id, clients, world, SetBudget(amount=Decimal(10)))
    assert record.status == "executed"
    assert (record.before, record.after) == (
        {"lifetime_budget": "900.00"},
        {"lifetime_budget": "10.00"},
    )
    assert world.updates == [("777", {"lifetime_budget": "1000"})]


async def test_a_write_refused_by_meta_is_an_error_record(
    runtime: Runtime, workspace_id: int, graph: tuple[GraphWorld, Clients]
) -> None:
    world, clients = graph
    world.add_campaign("act_1001", SimCampaign(id="778", name="Autumn", daily_budget=5000))
    world.fail("campaign.update:778", code=100, status=400, message="(#100) Invalid", times=-1)
    (record,) = await _run(runtime, workspace_id, clients, world, SetBudget(amount=Decimal(10)))
    assert record.status == "error"
    assert "(#100) Invalid" in (record.reason or "")
    assert world.updates == []
