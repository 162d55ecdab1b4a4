"""Run digests (issue 33 item 2, AR-27): one message per run and channel — e-mail, a signed JSON
webhook, Slack and Microsoft Teams incoming webhooks in their documented formats — with counts
per action and outcome, the top objects and a link to the run. Slack and Teams bodies are
asserted as their loopback simulators received them on the wire."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select, update

from app.demo.adrules import seed_demo
from app.demo.parts import DemoWorkspace
from app.engines.adrules.models import AdAccount, Batch, Rule, Task
from app.engines.adrules.notify.digest import RecordRow, build_digest
from app.engines.adrules.notify_models import Digest as DigestRow
from app.engines.adrules.payloads import AccountRef, RunAccountPayload
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    IncreaseBudget,
    MetricValueCondition,
    NotifyEmail,
    NotifyWebhook,
    TaskIn,
)
from app.engines.adrules.work.account import run_account_job
from app.integrations.mail import MailSender
from app.platform.models import Workspace
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.chat_webhooks import ChatWebhookSandbox, start_chat_sandbox
from app.sandbox.meta import GraphWorld, SimCampaign
from app.sandbox.meta.demo import start_demo_sandbox
from app.sandbox.smtp import SmtpSink
from app.settings import MailSettings
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    create_setup,
    create_workspace,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)

ALWAYS = MetricValueCondition(metric="impressions", operator="gte", value=Decimal(0))
PUBLIC = "https://sweepline.example"


@pytest.fixture
def workspace_id(ws: Any) -> int:
    return int(ws.workspace_id)


@pytest.fixture
async def clients(world: GraphWorld) -> AsyncIterator[Clients]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.add_account("act_2002", "Shop EU", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001", "act_2002")
    made = make_clients(world.base_url)
    yield made
    await made.aclose()


@pytest.fixture
async def chat() -> AsyncIterator[ChatWebhookSandbox]:
    sandbox = ChatWebhookSandbox()
    async with simulator_in_loop(sandbox):
        yield sandbox


async def _allow_loopback(runtime: Runtime, workspace_id: int) -> None:
    # The simulators listen on loopback: the workspace allows private targets (the guard's rule).
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Workspace).where(Workspace.id == workspace_id).values(allow_private_http=True)
        )


def _tasks(chat: ChatWebhookSandbox, *, extra: list[TaskIn] | None = None) -> list[TaskIn]:
    return [
        TaskIn(
            name="Scale",
            conditions=[ALWAYS],
            action=IncreaseBudget(amount=Decimal(10), by="percent", max=Decimal(10_000)),
            cooldown="15m",
        ),
        TaskIn(
            name="Tell Slack",
            conditions=[ALWAYS],
            action=NotifyWebhook(url=chat.slack_url(), format="slack"),
        ),
        TaskIn(
            name="Tell Teams",
            conditions=[ALWAYS],
            action=NotifyWebhook(url=chat.teams_url(), format="teams"),
        ),
        *(extra or []),
    ]


def _deps(runtime: Runtime, clients: Clients, mail: MailSender | None = None) -> Any:
    return dataclasses.replace(make_deps(runtime, clients, mail=mail), public_url=PUBLIC)


def _budgets(world: GraphWorld, account: str, budgets: list[int]) -> None:
    for n, budget in enumerate(budgets, start=1):
        world.add_campaign(
            account, SimCampaign(id=f"{account[-4:]}{n:02d}", name=f"C{n}", daily_budget=budget)
        )


def test_ar27_digest_counts_per_action_and_outcome_and_ranks_top_objects() -> None:
    """Counts per (action, outcome) over every record of the run; the top objects are the matched
    ones ranked by the size of their budget change, then by the spend a condition saw."""
    spend = [{"text": "spend today > 10", "seen": "55.10", "passed": True}]
    rows = [
        RecordRow(
            1,
            "a",
            "A",
            "increase_budget",
            "executed",
            None,
            {"daily_budget": "10.00"},
            {"daily_budget": "11.00"},
            [],
        ),
        RecordRow(
            1,
            "b",
            "B",
            "increase_budget",
            "executed",
            None,
            {"daily_budget": "100.00"},
            {"daily_budget": "110.00"},
            [],
        ),
        RecordRow(1, "c", "C", "increase_budget", "not_executed", "no", None, None, []),
        RecordRow(1, "d", "D", "increase_budget", "skipped", "cooldown", None, None, []),
        RecordRow(2, "a", "A", "pause_campaign", "error", "boom", None, None, []),
        RecordRow(
            3, "e", "E", "notify_webhook", "executed", None, None, {"in_digest": "Slack"}, spend
        ),
        RecordRow(
            3, "f", "F", "notify_webhook", "executed", None, None, {"in_digest": "Slack"}, []
        ),
    ]
    digest = build_digest(
        rows,
        rule_id=1,
        rule_name="R",
        batch_id="b1",
        at=datetime(2026, 3, 2, 9, tzinfo=UTC),
        level="campaign",
        accounts=["act_1"],
        run_url=f"{PUBLIC}/ui/adrules/log/1",
        limit=3,
    )
    assert [(c.action, c.status, c.count) for c in digest.counts] == [
        ("increase_budget", "executed", 2),
        ("increase_budget", "not_executed", 1),
        ("increase_budget", "skipped", 1),
        ("notify_webhook", "executed", 2),
        ("pause_campaign", "error", 1),
    ]
    assert [t.id for t in digest.top] == ["b", "a", "e"]  # |+10| > |+1| > spend 55.10 > none
    assert digest.top[0].change == Decimal("10.00")
    assert digest.top[2].spend == Decimal("55.10")
    assert (digest.records, digest.objects, digest.matched, digest.errors) == (7, 6, 4, 1)
    assert digest.approve_url is None


async def test_ar27_one_message_per_run_and_channel_in_slack_and_teams_formats(
    runtime: Runtime,
    workspace_id: int,
    world: GraphWorld,
    clients: Clients,
    chat: ChatWebhookSandbox,
) -> None:
    """A run over 12 campaigns with a budget task and Slack and Teams tasks sends exactly one
    Slack and one Teams message, each in the provider's documented shape, naming the top objects
    by budget change and linking to the run; a retried job sends nothing more."""
    await _allow_loopback(runtime, workspace_id)
    _budgets(world, "act_1001", [1000 * n for n in range(1, 13)])
    setup = await create_setup(runtime, workspace_id, tasks=_tasks(chat), rule_name="Scale up")
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    await run_account_job(_deps(runtime, clients), payload)

    assert chat.count("slack.post") == 1
    assert chat.count("teams.post") == 1
    [slack] = chat.messages("slack")
    [teams] = chat.messages("teams")

    # Slack: `text` (the notification's fallback) and `blocks`, as the receiver read them.
    assert slack["text"] == "Rule “Scale up”: 12 of 12 campaigns matched"
    kinds = [b["type"] for b in slack["blocks"]]
    assert kinds == ["header", "section", "section", "context", "actions"]
    counts = slack["blocks"][1]["text"]["text"]
    assert "• increase budget: 12 done" in counts
    assert "• notify webhook: 24 done" in counts  # two notify tasks x 12 objects
    top = slack["blocks"][2]["text"]["text"].splitlines()
    assert top[0] == "*Top 10*"
    # The largest budget change first: 120.00 -> 132.00 (+12) on C12.
    assert top[1].startswith("• *C12* (`100112`): daily budget 120.00 → 132.00")
    assert top[10].startswith("• *C3* ")
    [button] = slack["blocks"][4]["elements"]
    assert button["url"] == f"{PUBLIC}/ui/adrules/log/{payload.batch_record_id}"

    # Teams: a message with one Adaptive Card attachment (FactSet of counts, OpenUrl action).
    [attachment] = teams["attachments"]
    assert teams["type"] == "message"
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    facts = next(b for b in card["body"] if b["type"] == "FactSet")["facts"]
    assert {"title": "increase budget", "value": "12 done"} in facts
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Open the run",
            "url": f"{PUBLIC}/ui/adrules/log/{payload.batch_record_id}",
        }
    ]

    # The records say which digest each object went into; the digests are recorded as sent.
    async with runtime.db.read() as session:
        notified = (
            await session.scalars(
                select(ExecutionRecord.after).where(
                    ExecutionRecord.batch_id == payload.batch_id,
                    ExecutionRecord.action == "notify_webhook",
                )
            )
        ).all()
        digests = (
            await session.scalars(select(DigestRow).where(DigestRow.batch_id == payload.batch_id))
        ).all()
    assert {tuple(a.items()) for a in notified} == {
        (("in_digest", "Slack"),),
        (("in_digest", "Microsoft Teams"),),
    }
    assert sorted((d.channel, d.status, d.objects) for d in digests) == [
        ("slack", "sent", 36),
        ("teams", "sent", 36),
    ]
    # The Slack and Teams URLs are credentials: stored encrypted, shown masked (AR-24).
    async with runtime.db.read() as session:
        shown = (
            await session.scalars(
                select(ExecutionRecord.parameters).where(
                    ExecutionRecord.batch_id == payload.batch_id,
                    ExecutionRecord.action == "notify_webhook",
                )
            )
        ).all()
    assert {p["url"] for p in shown} == {f"{chat.url}/…stuvwx", f"{chat.url}/…bc/def"}
    assert all("abcdefghij" not in str(p) and p["has_secret"] for p in shown)

    # A retry of the job (records already there) finishes the batch again: no second message.
    await run_account_job(_deps(runtime, clients), payload)
    assert (chat.count("slack.post"), chat.count("teams.post")) == (1, 1)


async def test_ar27_a_run_over_two_accounts_sends_once_after_the_last_account(
    runtime: Runtime,
    workspace_id: int,
    world: GraphWorld,
    clients: Clients,
    chat: ChatWebhookSandbox,
) -> None:
    """The digest waits for the run's last account job and covers both accounts."""
    await _allow_loopback(runtime, workspace_id)
    _budgets(world, "act_1001", [1000, 2000])
    _budgets(world, "act_2002", [3000])
    setup = await create_setup(runtime, workspace_id, tasks=_tasks(chat))
    first = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    second_setup = await create_setup(
        runtime, workspace_id, tasks=_tasks(chat), account_meta_id="act_2002"
    )
    async with runtime.db.write() as uow:
        account = await uow.session.scalar(
            select(AdAccount).where(
                AdAccount.workspace_id == workspace_id, AdAccount.meta_id == "act_2002"
            )
        )
        assert account is not None
        batch = Batch(
            batch_id=first.batch_id,
            workspace_id=workspace_id,
            rule_id=setup.rule_id,
            ad_account_id=second_setup.account_id,
            account_meta_id="act_2002",
            status="queued",
            entities=1,
            tick_at=runtime.clock.now(),
            created_at=runtime.clock.now(),
        )
        uow.session.add(batch)
        await uow.session.flush()
    second: RunAccountPayload = msgspec.structs.replace(
        first,
        batch_record_id=batch.id,
        account=AccountRef(id=account.id, meta_id="act_2002", currency="USD", timezone_name="UTC"),
        entities=entities_from_world(world, "act_2002"),
    )
    await run_account_job(_deps(runtime, clients), first)
    assert chat.count("slack.post") == 0  # the other account is still queued
    await run_account_job(_deps(runtime, clients), second)
    assert (chat.count("slack.post"), chat.count("teams.post")) == (1, 1)
    [slack] = chat.messages("slack")
    assert slack["text"] == "Rule “Test rule”: 3 of 3 campaigns matched"
    assert "act_1001, act_2002" in slack["blocks"][3]["elements"][0]["text"]


async def test_ar27_an_email_digest_and_none_for_a_quiet_run(
    runtime: Runtime,
    workspace_id: int,
    world: GraphWorld,
    clients: Clients,
    chat: ChatWebhookSandbox,
) -> None:
    """E-mail goes through the mail path (one message for the run); a run where the notify
    task matched nothing sends nothing."""
    await _allow_loopback(runtime, workspace_id)
    _budgets(world, "act_1001", [1000, 2000, 3000])
    sink = SmtpSink().start()
    try:
        mail = MailSender(MailSettings(smtp_host=sink.host, smtp_port=sink.port))
        email = TaskIn(
            name="Mail",
            conditions=[ALWAYS],
            action=NotifyEmail(recipients=["ops@example.com"], subject="{rule}: {name}"),
        )
        setup = await create_setup(runtime, workspace_id, tasks=[email], rule_name="Watch")
        payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
        await run_account_job(_deps(runtime, clients, mail), payload)
        messages = sink.snapshot()
    finally:
        sink.stop()
    assert len(messages) == 1
    assert messages[0].subject == "Watch: 3 objects"
    assert "notify email: 3 done" in messages[0].body
    assert f"{PUBLIC}/ui/adrules/log/{payload.batch_record_id}" in messages[0].body

    never = MetricValueCondition(metric="impressions", operator="lt", value=Decimal(0))
    quiet = [
        TaskIn(
            name="Slack",
            conditions=[never],
            action=NotifyWebhook(url=chat.slack_url(), format="slack"),
        )
    ]
    setup = await create_setup(runtime, workspace_id, tasks=quiet, rule_name="Quiet")
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    await run_account_job(_deps(runtime, clients), payload)
    assert chat.count("slack.post") == 0


async def test_ar27_the_simulators_refuse_what_slack_and_teams_refuse(
    chat: ChatWebhookSandbox,
) -> None:
    """Slack answers `ok`, or 400 with `invalid_payload` / `no_text` / `invalid_blocks`; Teams
    answers `1`, or 400 (a MessageCard without summary or text, a card that is not an
    AdaptiveCard)."""
    async with httpx.AsyncClient() as http:

        async def slack(body: Any, raw: bytes | None = None) -> tuple[int, str]:
            r = await http.post(chat.slack_url(), content=raw or msgspec.json.encode(body))
            return r.status_code, r.text

        async def teams(body: Any) -> tuple[int, str]:
            r = await http.post(chat.teams_url(), content=msgspec.json.encode(body))
            return r.status_code, r.text

        assert await slack({"text": "hi"}) == (200, "ok")
        assert await slack(None, raw=b"not json") == (400, "invalid_payload")
        assert await slack({"username": "x"}) == (400, "no_text")
        header = {"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}
        assert await slack({"text": "t", "blocks": [header]}) == (400, "invalid_blocks")
        assert await slack({"text": "t", "blocks": [{"type": "banner"}]}) == (400, "invalid_blocks")
        too_many = [{"type": "divider"}] * 51
        assert await slack({"text": "t", "blocks": too_many}) == (400, "invalid_blocks")

        card = {
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [{"type": "TextBlock", "text": "x"}],
        }
        message: dict[str, Any] = {
            "type": "message",
            "attachments": [
                {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}
            ],
        }
        assert await teams(message) == (200, "1")
        assert await teams({"@type": "MessageCard", "summary": "s"}) == (200, "1")
        assert await teams({"@type": "MessageCard"}) == (400, "Summary or Text is required.")
        wrong = {**message, "attachments": [{"contentType": "text/plain", "content": card}]}
        assert (await teams(wrong))[0] == 400
        no_url = {**card, "actions": [{"type": "Action.OpenUrl", "title": "x"}]}
        bad = {**message, "attachments": [{**message["attachments"][0], "content": no_url}]}
        assert await teams(bad) == (400, "Action.OpenUrl needs a url")
    assert len(chat.received) == 3


async def test_ar27_the_demo_seeds_a_rule_that_asks_first_and_reports_to_slack_and_teams(
    runtime: Runtime,
) -> None:
    """With the chat simulators running, the demo adds a draft rule that requires approval and
    sends its digests to them (offline: loopback simulators only)."""
    meta = start_demo_sandbox()
    chat = start_chat_sandbox()
    try:
        made = await create_workspace(runtime, name="Demo")
        demo = DemoWorkspace(
            organisation_id=0,
            workspace_id=made.workspace_id,
            admin_user_id=0,
            sandbox_urls={"meta": meta.url, "chat": chat.url},
        )
        await seed_demo(runtime, demo)
    finally:
        chat.stop()
        meta.stop()
    async with runtime.db.read() as session:
        careful = await session.scalar(select(Rule).where(Rule.name.startswith("Cut budgets")))
        workspace = await session.get(Workspace, made.workspace_id)
        assert careful is not None
        tasks = (await session.scalars(select(Task).where(Task.rule_id == careful.id))).all()
    assert careful.status == "draft"
    assert careful.approval == {"required": True, "window_hours": 24}
    formats = sorted(t.document["action"].get("format", "") for t in tasks)
    assert formats == ["", "slack", "teams"]
    assert workspace is not None
    assert workspace.allow_private_http is True
