"""Approve before acting (issue 33 item 3, AR-28): a rule that requires approval records its
planned changes as proposals and writes nothing; its digest carries a signed, expiring approval
link; a member approves (API or the link's page) and the changes go through the work path —
re-read, re-plan, guards, the stop before each write — each exactly once; rejected and expired
proposals are recorded as such; approvals and rejections are in the audit log."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select, update

from app.engines.adrules.approvals import decide, links
from app.engines.adrules.approvals.expire import expire_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import Batch, Rule
from app.engines.adrules.notify_models import Proposal
from app.engines.adrules.run_models import ExecutionRecord
from app.engines.adrules.schemas import (
    Approval,
    IncreaseBudget,
    MetricValueCondition,
    NotifyWebhook,
    TaskIn,
)
from app.engines.adrules.stops import StopCheck
from app.engines.adrules.work.account import run_account_job
from app.errors import Conflict
from app.platform.audit.models import AuditEntry
from app.platform.models import Workspace
from app.platform.service import webhook_secret
from app.runtime import Runtime
from app.sandbox.base import simulator_in_loop
from app.sandbox.chat_webhooks import ChatWebhookSandbox
from app.sandbox.meta import GraphWorld, SimCampaign
from app.settings import Settings
from app.web.app import create_app
from tests.engines.adrules.factories import (
    JOB_TOKEN,
    Clients,
    Setup,
    create_account,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
    rule_body,
    store_token,
)
from tests.factories import Tenant
from tests.harness.app_client import asgi_transport
from tests.harness.clock import manual_clock
from tests.platform.conftest import sign_in

ALWAYS = MetricValueCondition(metric="impressions", operator="gte", value=Decimal(0))
PUBLIC = "https://sweepline.example"


@pytest.fixture
def workspace_id(ws: Any) -> int:
    return int(ws.workspace_id)


@pytest.fixture
async def clients(world: GraphWorld) -> AsyncIterator[Clients]:
    world.add_account("act_1001", "Shop", currency="USD", timezone_name="UTC")
    world.grant(JOB_TOKEN, "act_1001")
    made = make_clients(world.base_url)
    yield made
    await made.aclose()


@pytest.fixture
async def chat() -> AsyncIterator[ChatWebhookSandbox]:
    sandbox = ChatWebhookSandbox()
    async with simulator_in_loop(sandbox):
        yield sandbox


class SwitchableStop(StopCheck):
    """The stop switches' interface, switched by the test: on from the ``after``-th question."""

    def __init__(self, reason: str | None = None, after: int = 0) -> None:
        self.reason_text, self.after, self.asked = reason, after, 0

    async def reason(self, workspace_id: int) -> str | None:
        self.asked += 1
        return self.reason_text if self.asked > self.after else None


def _deps(runtime: Runtime, clients: Clients, **changes: Any) -> AdRulesDeps:
    return dataclasses.replace(make_deps(runtime, clients), public_url=PUBLIC, **changes)


async def _proposed_run(
    runtime: Runtime,
    workspace_id: int,
    world: GraphWorld,
    clients: Clients,
    chat: ChatWebhookSandbox | None = None,
    *,
    campaigns: int = 3,
    window_hours: int = 24,
) -> Any:
    """A run of a rule that requires approval (raise budgets 10%, tell Slack) on ``campaigns``."""
    async with runtime.db.write() as uow:
        await uow.session.execute(
            update(Workspace).where(Workspace.id == workspace_id).values(allow_private_http=True)
        )
    await store_token(runtime, workspace_id, JOB_TOKEN)
    for n in range(1, campaigns + 1):
        world.add_campaign(
            "act_1001", SimCampaign(id=f"90{n}", name=f"C{n}", daily_budget=1000 * n)
        )
    tasks = [
        TaskIn(
            name="Scale",
            conditions=[ALWAYS],
            action=IncreaseBudget(amount=Decimal(10), by="percent", max=Decimal(10_000)),
            cooldown="15m",
        )
    ]
    if chat is not None:
        tasks.append(
            TaskIn(
                name="Slack",
                conditions=[ALWAYS],
                action=NotifyWebhook(url=chat.slack_url(), format="slack"),
            )
        )
    setup = await create_setup(runtime, workspace_id, tasks=tasks, rule_name="Careful")
    payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
    approval = Approval(window_hours=window_hours)
    payload = msgspec.structs.replace(
        payload, rule=msgspec.structs.replace(payload.rule, approval=approval)
    )
    await run_account_job(_deps(runtime, clients), payload)
    return payload


async def _records(runtime: Runtime, batch_id: str, action: str = "increase_budget") -> list[Any]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(ExecutionRecord)
            .where(ExecutionRecord.batch_id == batch_id, ExecutionRecord.action == action)
            .order_by(ExecutionRecord.campaign_id)
        )
        return list(rows.all())


async def _proposals(runtime: Runtime, batch_id: str) -> list[Proposal]:
    async with runtime.db.read() as session:
        rows = await session.scalars(
            select(Proposal).where(Proposal.batch_id == batch_id).order_by(Proposal.campaign_id)
        )
        return list(rows.all())


async def test_ar28_a_run_proposes_writes_nothing_and_its_digest_carries_a_signed_link(
    runtime: Runtime,
    workspace_id: int,
    world: GraphWorld,
    clients: Clients,
    chat: ChatWebhookSandbox,
) -> None:
    payload = await _proposed_run(runtime, workspace_id, world, clients, chat)
    assert world.count("campaign.update") == 0
    records = await _records(runtime, payload.batch_id)
    assert [r.status for r in records] == ["proposed"] * 3
    assert records[0].before == {"daily_budget": "10.00"}
    assert records[0].after == {"daily_budget": "11.00"}
    assert "awaiting approval until 2026-03-03 09:00 UTC" in (records[0].reason or "")
    proposals = await _proposals(runtime, payload.batch_id)
    assert [(p.status, p.write) for p in proposals] == [
        ("pending", {"daily_budget": 1100}),
        ("pending", {"daily_budget": 2200}),
        ("pending", {"daily_budget": 3300}),
    ]

    [slack] = chat.messages("slack")
    assert slack["text"].endswith(", 3 changes await approval")
    approve_button = slack["blocks"][-1]["elements"][0]
    assert approve_button["text"]["text"] == "Review and approve"
    token = approve_button["url"].removeprefix(f"{PUBLIC}{links.ROUTE_PREFIX}")
    async with runtime.db.read() as session:
        workspace = await session.get(Workspace, workspace_id)
        assert workspace is not None
    secret = webhook_secret(runtime.secrets, workspace)
    claims = links.verify(secret, token, runtime.clock.now())
    assert claims is not None
    assert (claims.workspace_id, claims.batch_id) == (workspace_id, payload.batch_id)
    assert claims.expires_at == proposals[0].expires_at
    assert links.verify(secret, token[:-2] + "xx", runtime.clock.now()) is None  # tampered
    assert links.verify(secret, token, proposals[0].expires_at) is None  # expired

    # The next run, while they wait, does not propose the same changes again.
    again = await make_payload(
        runtime,
        await _setup_like(runtime, payload),
        entities_from_world(world, "act_1001"),
    )
    again = msgspec.structs.replace(again, rule=payload.rule)
    await run_account_job(_deps(runtime, clients), again)
    assert {r.status for r in await _records(runtime, again.batch_id)} == {"skipped"}
    assert len(await _proposals(runtime, again.batch_id)) == 0


async def _setup_like(runtime: Runtime, payload: Any) -> Any:
    return Setup(
        payload.workspace_id,
        payload.account.id,
        payload.account.meta_id,
        payload.account.currency,
        payload.rule.id,
        payload.rule.name,
        "UTC",
        payload.rule.tasks,
    )


async def test_ar28_approval_executes_through_the_work_path_exactly_once(
    runtime: Runtime, workspace_id: int, world: GraphWorld, clients: Clients
) -> None:
    """Two approvals at once write each change once; a changed object is skipped with the
    reason; a third approval finds nothing left."""
    payload = await _proposed_run(runtime, workspace_id, world, clients)
    world.accounts["act_1001"].campaigns["902"].daily_budget = 2500  # changed meanwhile
    deps = _deps(runtime, clients)
    first, second = await asyncio.gather(
        decide.approve(
            deps, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="ann"
        ),
        decide.approve(
            deps, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="bob"
        ),
    )
    assert first.claimed + second.claimed == 3
    assert first.executed + second.executed == 2
    assert first.skipped + second.skipped == 1
    assert sorted(world.updates) == [
        ("901", {"daily_budget": "1100"}),
        ("903", {"daily_budget": "3300"}),
    ]
    records = {r.campaign_id: r for r in await _records(runtime, payload.batch_id)}
    assert records["901"].status == "executed"
    assert records["901"].reason in ("approved by ann", "approved by bob")
    assert records["901"].next_permitted_at is not None
    assert records["902"].status == "skipped"
    assert "changed since it was proposed" in (records["902"].reason or "")
    assert [p.status for p in await _proposals(runtime, payload.batch_id)] == [
        "executed",
        "skipped",
        "executed",
    ]
    third = await decide.approve(
        deps, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="ann"
    )
    assert (third.claimed, third.executed) == (0, 0)
    assert world.count("campaign.update") >= 1
    assert len(world.updates) == 2
    async with runtime.db.read() as session:
        batch = await session.scalar(select(Batch).where(Batch.batch_id == payload.batch_id))
        audit = (
            await session.scalars(
                select(AuditEntry.action).where(AuditEntry.workspace_id == workspace_id)
            )
        ).all()
    assert batch is not None
    assert (batch.executed, batch.skipped) == (2, 1)
    # One audit entry per approval that claimed any (the later, empty one claims nothing).
    assert audit.count("adrule.proposals_approved") == sum(1 for d in (first, second) if d.claimed)


async def test_ar28_reject_expire_and_foreign_workspace(
    runtime: Runtime, workspace_id: int, other_ws: Any, world: GraphWorld, clients: Clients
) -> None:
    payload = await _proposed_run(runtime, workspace_id, world, clients, window_hours=2)
    deps = _deps(runtime, clients)
    ids = [p.id for p in await _proposals(runtime, payload.batch_id)]
    with pytest.raises(decide.ProposalsNotFound):
        await decide.approve(
            deps, workspace_id=other_ws.workspace_id, batch_id=payload.batch_id, decided_by="x"
        )
    rejected = await decide.reject(
        deps,
        workspace_id=workspace_id,
        batch_id=payload.batch_id,
        decided_by="ann",
        proposal_ids=ids[:1],
    )
    assert (rejected.claimed, rejected.rejected) == (1, 1)
    # The window ends: the sweep records the others as expired; approval comes too late.
    manual_clock(runtime).advance(hours=2)
    late = await decide.approve(
        deps, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="bob"
    )
    assert late.claimed == 0
    assert await expire_due(runtime.db, runtime.clock.now()) == 2
    assert await expire_due(runtime.db, runtime.clock.now()) == 0
    assert [p.status for p in await _proposals(runtime, payload.batch_id)] == [
        "rejected",
        "expired",
        "expired",
    ]
    records = await _records(runtime, payload.batch_id)
    assert [r.status for r in records] == ["skipped"] * 3
    assert records[0].reason == "rejected by ann"
    assert "approval window ended at 2026-03-02 11:00 UTC" in (records[1].reason or "")
    assert world.updates == []
    async with runtime.db.read() as session:
        actions = (
            await session.scalars(
                select(AuditEntry.action).where(AuditEntry.workspace_id == workspace_id)
            )
        ).all()
    assert "adrule.proposals_rejected" in actions


async def test_ar28_the_stop_is_honoured_on_approved_execution(
    runtime: Runtime, workspace_id: int, world: GraphWorld, clients: Clients
) -> None:
    """A stop that is on refuses the approval (nothing claimed, still pending); a stop set
    between the claim and the write keeps every write from being made (AR-23)."""
    payload = await _proposed_run(runtime, workspace_id, world, clients)
    stopped = _deps(runtime, clients, stop=SwitchableStop("the workspace is stopped"))
    with pytest.raises(Conflict):
        await decide.approve(
            stopped, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="ann"
        )
    assert {p.status for p in await _proposals(runtime, payload.batch_id)} == {"pending"}
    midway = _deps(runtime, clients, stop=SwitchableStop("stopped during the approval", after=1))
    decision = await decide.approve(
        midway, workspace_id=workspace_id, batch_id=payload.batch_id, decided_by="ann"
    )
    assert (decision.claimed, decision.executed, decision.skipped) == (3, 0, 3)
    assert world.updates == []
    assert world.count("campaign.update") == 0
    records = await _records(runtime, payload.batch_id)
    assert {r.reason for r in records} == {"stopped during the approval"}


async def test_ar28_approve_by_api_and_by_the_signed_link_page(
    runtime: Runtime,
    workspace_id: int,
    ws: Any,
    other_ws: Any,
    client: Any,
    world: GraphWorld,
    clients: Clients,
) -> None:
    payload = await _proposed_run(runtime, workspace_id, world, clients, campaigns=2)
    url = f"/api/v1/adrules/batches/{payload.batch_record_id}"
    listed = await client.get(f"{url}/proposals", headers=ws.headers)
    assert listed.status_code == 200, listed.text
    [first, second] = listed.json()["items"]
    assert first["status"] == "pending"
    foreign = await client.post(f"{url}/approve", headers=other_ws.headers)
    assert foreign.status_code == 404
    done = await client.post(
        f"{url}/approve", json={"proposal_ids": [first["id"]]}, headers=ws.headers
    )
    assert done.status_code == 200, done.text
    assert (done.json()["claimed"], done.json()["executed"]) == (1, 1)
    assert world.updates == [("901", {"daily_budget": "1100"})]

    # The link's page asks first (a GET changes nothing), its button approves the rest.
    async with runtime.db.read() as session:
        workspace = await session.get(Workspace, workspace_id)
        assert workspace is not None
    [proposal] = [p for p in await _proposals(runtime, payload.batch_id) if p.status == "pending"]
    token = links.sign(
        webhook_secret(runtime.secrets, workspace),
        workspace_id=workspace_id,
        batch_id=payload.batch_id,
        expires_at=proposal.expires_at,
    )
    page = await client.get(f"{links.ROUTE_PREFIX}{token}")
    assert page.status_code == 200
    assert "Approve these changes?" in page.text
    assert "C2 (902)" in page.text
    assert len(world.updates) == 1
    bad = await client.post(f"{links.ROUTE_PREFIX}{token[:-3]}abc")
    assert bad.status_code == 404
    approved = await client.post(f"{links.ROUTE_PREFIX}{token}")
    assert approved.status_code == 200
    assert "1 changes applied" in approved.text
    assert world.updates[1] == ("902", {"daily_budget": "2200"})
    again = await client.post(f"{links.ROUTE_PREFIX}{token}")
    assert "already decided" in again.text
    assert len(world.updates) == 2
    listed = await client.get(f"{url}/proposals", headers=ws.headers)
    decided = {p["id"]: p for p in listed.json()["items"]}
    assert decided[second["id"]]["decided_by"] == "approval link"


async def test_ar28_the_approval_field_is_validated_and_answered(
    client: Any, ws: Any, runtime: Runtime
) -> None:
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_7")
    base = rule_body(account_ids=[account.id])
    base["tasks"] = [*base["tasks"], _notify_task(base)]
    bad = await client.post(
        "/api/v1/adrules/rules", json={**base, "approval": {"window_hours": 0}}, headers=ws.headers
    )
    assert bad.status_code in (400, 422)
    assert "approval.window_hours" in bad.text
    shadow = await client.post(
        "/api/v1/adrules/rules",
        json={**base, "status": "shadow", "approval": {"window_hours": 4}},
        headers=ws.headers,
    )
    assert shadow.status_code == 422
    assert shadow.json()["details"][0]["field"] == "approval"
    made = await client.post(
        "/api/v1/adrules/rules", json={**base, "approval": {"window_hours": 4}}, headers=ws.headers
    )
    assert made.status_code == 201, made.text
    assert made.json()["approval"] == {"required": True, "window_hours": 4}
    plain = await client.post("/api/v1/adrules/rules", json=base, headers=ws.headers)
    assert plain.json()["approval"] is None


async def test_ar28_the_batch_page_shows_the_changes_and_its_button_approves(
    runtime: Runtime, tenant: Tenant, settings: Settings, world: GraphWorld, clients: Clients
) -> None:
    """The rule log's batch page names the waiting changes with Approve and Reject buttons
    (a form with the CSRF token); the button carries them out."""
    payload = await _proposed_run(runtime, tenant.workspace_id, world, clients, campaigns=2)
    app = create_app(settings, runtime, background=False)
    transport = asgi_transport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as browser:
        await sign_in(browser, tenant.member_email, tenant.member_password)
        page = await browser.get(f"/ui/adrules/log/{payload.batch_record_id}")
        assert page.status_code == 200
        assert "2 changes await approval" in page.text
        assert 'id="approve-run"' in page.text
        assert 'data-status="proposed"' in page.text
        assert world.updates == []
        approved = await browser.post(
            f"/ui/adrules/log/{payload.batch_record_id}/approve",
            headers={"x-csrf-token": browser.cookies["swl_csrf"]},
        )
        assert approved.status_code in (302, 303), approved.text
        assert sorted(world.updates) == [
            ("901", {"daily_budget": "1100"}),
            ("902", {"daily_budget": "2200"}),
        ]
        after = await browser.get(f"/ui/adrules/log/{payload.batch_record_id}")
        assert 'id="approve-run"' not in after.text
        assert "decided by user:" in after.text


async def test_ar28_the_rule_editor_sets_and_shows_ask_before_acting(
    runtime: Runtime, tenant: Tenant, settings: Settings
) -> None:
    app = create_app(settings, runtime, background=False)
    transport = asgi_transport(app)
    tasks = (
        '[{"conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", '
        '"value": "5"}], "action": {"type": "pause_campaign"}, "cooldown": "1h"}, '
        '{"conditions": [{"type": "metric_value", "metric": "spend", "operator": "gt", '
        '"value": "5"}], "action": {"type": "notify_email", "recipients": ["buyer@example.com"], '
        '"subject": "Paused"}, "cooldown": "1h"}]'
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as browser:
        await sign_in(browser, tenant.email, tenant.password)
        saved = await browser.post(
            "/ui/adrules/rules",
            data={
                "name": "Careful pause",
                "status": "draft",
                "level": "campaign",
                "mode": "interval",
                "minutes": "60",
                "tasks_json": tasks,
                "approval_required": "1",
                "approval_window_hours": "6",
            },
            headers={"x-csrf-token": browser.cookies["swl_csrf"]},
        )
        assert saved.status_code in (302, 303), saved.text
        async with runtime.db.read() as session:
            rule = await session.scalar(select(Rule).where(Rule.name == "Careful pause"))
        assert rule is not None
        assert rule.approval == {"required": True, "window_hours": 6}
        edit = await browser.get(f"/ui/adrules/rules/{rule.id}")
        assert 'id="approval-required" checked' in edit.text
        assert 'name="approval_window_hours" min="1" max="168" value="6"' in edit.text


def _notify_task(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "conditions": body["tasks"][0]["conditions"],
        "action": {"type": "notify_email", "recipients": ["buyer@example.com"], "subject": "x"},
        "cooldown": "1h",
    }


async def test_ar28_a_rule_that_asks_first_names_someone_to_ask(client: Any, ws: Any) -> None:
    """Without a notifying task nobody would hear of the proposals: refused, naming the field."""
    body = rule_body(status="draft", approval={"required": True, "window_hours": 24})
    r = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert r.status_code == 422, r.text
    assert [d["field"] for d in r.json()["details"]] == ["approval"]
    body["tasks"] = [*body["tasks"], _notify_task(body)]
    r = await client.post("/api/v1/adrules/rules", json=body, headers=ws.headers)
    assert r.status_code == 201, r.text
