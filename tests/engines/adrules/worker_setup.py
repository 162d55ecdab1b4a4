"""Builders for worker tests: an active ad account, a rule with tasks, a batch record and the job
payload the dispatcher would send, plus worker dependencies pointed at loopback simulators."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.models import AdAccount, Batch, Rule, RuleAccount, Task
from app.engines.adrules.payloads import AccountRef, CampaignEntity, RunAccountPayload, seal_token
from app.engines.adrules.schemas import PreFilters, RuleDocument, TaskDocument, TaskIn
from app.engines.adrules.webhook_secrets import seal_task
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.http_guard import GuardedHttp, RetryPolicy
from app.integrations.mail import MailSender
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import SheetsClient
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.meta import GraphWorld, create_app

TOKEN = "EAAB-test-token"


@dataclass
class Setup:
    workspace_id: int
    account_id: int
    account_meta_id: str
    currency: str
    rule_id: int
    rule_name: str
    timezone: str
    tasks: list[TaskDocument]


async def create_setup(
    runtime: Runtime,
    workspace_id: int,
    *,
    tasks: Sequence[TaskIn],
    account_meta_id: str = "act_1001",
    currency: str = "USD",
    timezone: str = "UTC",
    rule_name: str = "Test rule",
    status: str = "active",
) -> Setup:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        s = uow.session
        account = await s.scalar(
            select(AdAccount).where(
                AdAccount.workspace_id == workspace_id, AdAccount.meta_id == account_meta_id
            )
        )
        if account is None:
            account = AdAccount(
                workspace_id=workspace_id,
                meta_id=account_meta_id,
                name=f"Account {account_meta_id}",
                currency=currency,
                timezone_name=timezone,
                account_status=1,
                active=True,
                discovered_at=now,
                activated_at=now,
            )
            s.add(account)
        rule = Rule(
            workspace_id=workspace_id,
            name=rule_name,
            status=status,
            prefilters={},
            schedule={"mode": "interval", "minutes": 60},
            next_execution_at=now,
            created_at=now,
            updated_at=now,
        )
        s.add(rule)
        await s.flush()
        s.add(RuleAccount(rule_id=rule.id, ad_account_id=account.id))
        docs: list[TaskDocument] = []
        for position, given in enumerate(tasks):
            # Stored as the rule service stores it (a webhook's secret encrypted).
            task = seal_task(given, runtime.secrets, previous=None, field=f"tasks[{position}]")
            body = msgspec.to_builtins(task)
            body.pop("id", None)
            name = body.pop("name", "") or f"Task {position + 1}"
            row = Task(
                rule_id=rule.id,
                workspace_id=workspace_id,
                position=position,
                name=name,
                document=body,
                created_at=now,
                updated_at=now,
            )
            s.add(row)
            await s.flush()
            docs.append(msgspec.convert({**body, "id": row.id, "name": name}, TaskDocument))
    return Setup(
        workspace_id, account.id, account_meta_id, currency, rule.id, rule_name, timezone, docs
    )


async def create_batch(runtime: Runtime, setup: Setup, entities: int) -> tuple[str, int]:
    batch_id = uuid.uuid4().hex
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        batch = Batch(
            batch_id=batch_id,
            workspace_id=setup.workspace_id,
            rule_id=setup.rule_id,
            ad_account_id=setup.account_id,
            account_meta_id=setup.account_meta_id,
            status="queued",
            entities=entities,
            pages=1,
            fetch_attempts=1,
            executed=0,
            not_executed=0,
            skipped=0,
            errors=0,
            tick_at=now,
            created_at=now,
        )
        uow.session.add(batch)
        await uow.session.flush()
    return batch_id, batch.id


def entities_from_world(world: GraphWorld, account_meta_id: str) -> list[CampaignEntity]:
    """The campaigns as the dispatcher would have fetched them (a snapshot)."""
    out = []
    for c in world.accounts[account_meta_id].campaigns.values():
        out.append(
            CampaignEntity(
                id=c.id,
                name=c.name,
                effective_status=c.effective_status,
                daily_budget=c.daily_budget,
                lifetime_budget=c.lifetime_budget,
                created_time=c.created_time,
            )
        )
    return out


async def make_payload(
    runtime: Runtime, setup: Setup, entities: list[CampaignEntity], *, token: str = TOKEN
) -> RunAccountPayload:
    batch_id, record_id = await create_batch(runtime, setup, len(entities))
    rule = RuleDocument(
        id=setup.rule_id,
        workspace_id=setup.workspace_id,
        name=setup.rule_name,
        timezone=setup.timezone,
        prefilters=PreFilters(),
        tasks=setup.tasks,
        updated_at=runtime.clock.now(),
    )
    return RunAccountPayload(
        batch_id=batch_id,
        batch_record_id=record_id,
        workspace_id=setup.workspace_id,
        rule=rule,
        account=AccountRef(
            id=setup.account_id,
            meta_id=setup.account_meta_id,
            currency=setup.currency,
            timezone_name=setup.timezone,
        ),
        entities=entities,
        access_token_encrypted=seal_token(runtime.secrets, token),
        dispatched_at=runtime.clock.now(),
    )


@asynccontextmanager
async def serve_graph(world: GraphWorld) -> AsyncIterator[str]:
    """The Graph API simulator on a loopback port, in the test's own event loop."""
    async with serve_in_loop(create_app(world)) as url:
        world.base_url = url
        yield url


def manual_sleep(clock: Any) -> Any:
    """Waiting on a ManualClock in a test: move the clock instead of blocking."""

    async def sleep(seconds: float) -> None:
        if isinstance(clock, ManualClock):
            clock.advance(seconds)

    return sleep


@dataclass
class Clients:
    graph: GraphClient
    sheets: SheetsClient
    http: GuardedHttp

    async def aclose(self) -> None:
        await self.graph.aclose()
        await self.sheets.aclose()
        await self.http.aclose()


def make_clients(graph_url: str, sheets_url: str = "http://127.0.0.1:9") -> Clients:
    async def no_wait(_: float) -> None:
        return None

    return Clients(
        graph=GraphClient(graph_url, "v21.0", timeout_seconds=10),
        sheets=SheetsClient(sheets_url, retry_delays=(0.0,), sleep=no_wait),
        http=GuardedHttp(timeout=5.0, policy=RetryPolicy(attempts=1)),
    )


def make_deps(
    runtime: Runtime,
    clients: Clients,
    *,
    mode: str = "packed",
    cache: SheetCache | None = None,
    mail: MailSender | None = None,
) -> AdRulesDeps:
    return AdRulesDeps(
        db=runtime.db,
        queue=runtime.queue,
        clock=runtime.clock,
        secrets=runtime.secrets,
        graph=clients.graph,
        sheets=clients.sheets,
        sheet_cache=cache or SheetCache(),
        job=RUN_ACCOUNT,
        mail=mail,
        webhook_http=clients.http,
        sleep=manual_sleep(runtime.clock),
        insights_mode=mode,
    )


async def make_workspace(runtime: Runtime, *, timezone: str = "UTC") -> int:
    """A bare workspace (no people: hashing their passwords is the slow part of a tenant)."""
    from app.platform import service

    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Worker tests", now=now)
        created = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name="Ads",
            timezone=timezone,
            now=now,
        )
    return created.workspace.id
