"""The ad-rules test builders and fixtures: the Graph API simulator (one server per session, a fresh
world per test), settings pointing at it, a Graph client on them, and factories for workspaces,
accounts, rules and dispatch dependencies; for the per-account job, a rule with tasks on an active
account, its batch record and the payload the dispatcher would send, with the job's dependencies
pointed at loopback simulators; and a rule run a few times, the records the rule log's charts are
drawn from. ``conftest.py`` re-exports the fixtures; browser tests import them from here."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.clock import ManualClock
from app.engines.adrules import accounts as account_service
from app.engines.adrules import rules as rule_service
from app.engines.adrules.claim.dispatch import DispatchSummary, dispatch_due
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.jobs import RUN_ACCOUNT
from app.engines.adrules.models import AdAccount, Batch, Rule, RuleAccount, Task
from app.engines.adrules.payloads import (
    RUN_ACCOUNT_JOB,
    AccountRef,
    CampaignEntity,
    RunAccountPayload,
    seal_token,
)
from app.engines.adrules.schemas import PreFilters, RuleDocument, RuleIn, TaskDocument, TaskIn
from app.engines.adrules.webhook_secrets import seal_task
from app.engines.adrules.work.account import run_account_job
from app.engines.adrules.work.sheets_values import SheetCache
from app.integrations.http_guard import GuardedHttp, RetryPolicy, shared_guard
from app.integrations.mail import MailSender
from app.integrations.meta.client import GraphClient
from app.integrations.sheets import SheetsClient
from app.platform import service as platform_service
from app.runtime import Runtime
from app.sandbox.base import serve_in_loop
from app.sandbox.meta import GraphWorld, SimCampaign, create_app, serve_world
from app.sandbox.meta.oauth import SIM_APP_ID, SIM_APP_SECRET
from app.scheduling.jobs import JobContext, JobSpec
from app.scheduling.queue import DatabaseQueue, JobQueue
from app.settings import Settings
from tests.harness.clock import manual_clock
from tests.harness.sleep import RecordingSleep

TOKEN = "EAAB-test-token-0123456789"


@dataclasses.dataclass(frozen=True)
class Workspace:
    """A workspace with an API key and no people: password hashing is what makes the full tenant
    factory slow, and these tests need no sign-in."""

    workspace_id: int
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


async def create_workspace(runtime: Runtime, *, name: str, timezone: str = "UTC") -> Workspace:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await platform_service.create_organisation(uow.session, name=name, now=now)
        created = await platform_service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name=f"{name} ads",
            timezone=timezone,
            now=now,
        )
        _, key = await platform_service.create_api_key(
            uow.session, workspace_id=created.workspace.id, name="tests", now=now
        )
    return Workspace(created.workspace.id, key)


@pytest.fixture
async def ws(runtime: Runtime) -> Workspace:
    return await create_workspace(runtime, name="Acme")


@pytest.fixture
async def other_ws(runtime: Runtime) -> Workspace:
    return await create_workspace(runtime, name="Globex")


@pytest.fixture(scope="session")
def graph_server() -> Iterator[GraphWorld]:
    world = GraphWorld()
    server = serve_world(world)
    try:
        yield world
    finally:
        server.stop()


@pytest.fixture(scope="session")
def settings(settings: Settings, graph_server: GraphWorld) -> Settings:
    """The suite's settings with the Graph API, and Facebook Login for the simulator's own app,
    pointed at the simulator."""
    integrations = dataclasses.replace(
        settings.integrations,
        meta_graph_url=graph_server.base_url,
        meta_graph_version="v21.0",
        meta_dialog_url=graph_server.base_url,
        meta_app_id=SIM_APP_ID,
        meta_app_secret=SIM_APP_SECRET,
    )
    return dataclasses.replace(settings, integrations=integrations)


@pytest.fixture
def world(graph_server: GraphWorld) -> GraphWorld:
    graph_server.reset()
    return graph_server


@pytest.fixture
async def graph(settings: Settings) -> AsyncIterator[GraphClient]:
    client = GraphClient(
        settings.integrations.meta_graph_url, settings.integrations.meta_graph_version
    )
    yield client
    await client.aclose()


async def create_account(
    runtime: Runtime,
    *,
    workspace_id: int,
    meta_id: str,
    active: bool = True,
    currency: str = "USD",
    name: str = "",
    timezone_name: str = "UTC",
) -> AdAccount:
    async with runtime.db.write() as uow:
        account = AdAccount(
            workspace_id=workspace_id,
            meta_id=meta_id,
            name=name or f"Account {meta_id}",
            currency=currency,
            timezone_name=timezone_name,
            account_status=1,
            active=active,
            discovered_at=runtime.clock.now(),
            activated_at=runtime.clock.now() if active else None,
        )
        uow.session.add(account)
    return account


async def store_token(runtime: Runtime, workspace_id: int, token: str = TOKEN) -> None:
    async with runtime.db.write() as uow:
        await account_service.store_token(
            uow.session,
            runtime.secrets,
            workspace_id=workspace_id,
            token=token,
            now=runtime.clock.now(),
        )


def rule_body(**overrides: Any) -> dict[str, Any]:
    """A valid rule as the API takes it (log_only on spend > 10 today)."""
    body: dict[str, Any] = {
        "name": "Spend watch",
        "status": "active",
        "account_ids": [],
        "schedule": {"mode": "interval", "minutes": 15},
        "tasks": [
            {
                "conditions": [
                    {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "10"}
                ],
                "action": {"type": "log_only"},
                "cooldown": "1h",
            }
        ],
    }
    body.update(overrides)
    return body


async def create_rule(runtime: Runtime, *, workspace_id: int, **overrides: Any) -> int:
    data = msgspec.convert(rule_body(**overrides), RuleIn)
    async with runtime.db.write() as uow:
        rule = await rule_service.create_rule(
            uow.session,
            runtime.secrets,
            shared_guard(runtime.resources, runtime.settings.integrations),
            workspace_id=workspace_id,
            data=data,
            now=runtime.clock.now(),
        )
    return rule.id


async def _never_run(ctx: JobContext, payload: RunAccountPayload) -> None:
    raise AssertionError("dispatch tests read queued jobs; they do not run them")


TEST_JOB: JobSpec[RunAccountPayload] = JobSpec(
    name=RUN_ACCOUNT_JOB, payload_type=RunAccountPayload, handler=_never_run, max_tries=3
)


def dispatch_deps(
    runtime: Runtime,
    *,
    graph: GraphClient,
    sleep: Any = None,
    queue: JobQueue | None = None,
    stopped: bool = False,
    job: JobSpec[RunAccountPayload] = TEST_JOB,
) -> AdRulesDeps:
    process = runtime.resources.require(AdRulesDeps)
    return AdRulesDeps(
        db=runtime.db,
        queue=queue or DatabaseQueue(runtime.db, runtime.clock),
        clock=runtime.clock,
        secrets=runtime.secrets,
        sleep=sleep or RecordingSleep(),
        graph=graph,
        sheets=process.sheets,
        sheet_cache=process.sheet_cache,
        job=job,
        stopped=lambda: stopped,
    )


def at(clock: ManualClock) -> datetime:
    return clock.now()


# -- the per-account job -------------------------------------------------------------------------

JOB_TOKEN = "EAAB-test-token"
"""The token sealed into the account-job payloads :func:`make_payload` builds."""


@dataclasses.dataclass
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
    runtime: Runtime, setup: Setup, entities: list[CampaignEntity], *, token: str = JOB_TOKEN
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


@dataclasses.dataclass
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
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await platform_service.create_organisation(uow.session, name="Worker tests", now=now)
        created = await platform_service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name="Ads",
            timezone=timezone,
            now=now,
        )
    return created.workspace.id


# -- a rule run a few times ----------------------------------------------------------------------


async def run_rule(
    runtime: Runtime,
    world: GraphWorld,
    workspace_id: int,
    task: TaskIn,
    campaigns: Sequence[SimCampaign],
    *,
    runs: int,
) -> tuple[Setup, list[int]]:
    """Create the rule with ``task`` on act_1001 holding ``campaigns``, run it ``runs`` times and
    return it with the batch record ids, oldest first."""
    world.add_account("act_1001", "Shop")
    world.grant(JOB_TOKEN, "act_1001")
    for campaign in campaigns:
        world.add_campaign("act_1001", campaign)
    setup = await create_setup(runtime, workspace_id, tasks=[task], rule_name="Scale rule")
    clients = make_clients(world.base_url)
    batches = []
    try:
        for _ in range(runs):
            payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
            await run_account_job(make_deps(runtime, clients), payload)
            batches.append(payload.batch_record_id)
            manual_clock(runtime).advance(hours=2)
    finally:
        await clients.aclose()
    return setup, batches


async def drive_tick(
    deps: AdRulesDeps, world: GraphWorld, tick: datetime, *, step: float = 0.25
) -> DispatchSummary:
    """Run one dispatch sweep whose Graph calls may hang on the simulator, moving the manual clock
    on only while the sweep is waiting on held calls alone: every call the fetch pool has out is
    held by the simulator (none in transit, none being answered) and no rule is still being
    claimed. Outcomes then follow from the clock, not from how fast this machine is."""
    clock = deps.clock
    assert isinstance(clock, ManualClock)
    summary = DispatchSummary()
    task = asyncio.create_task(dispatch_due(deps, tick, clock.now, summary))
    while not task.done():
        # Let every coroutine the last step woke run its course first.
        for _ in range(50):
            await asyncio.sleep(0)
        fetch = summary.fetch
        if not fetch.admitting and 0 < world.held == fetch.calling + fetch.slow:
            clock.advance(step)
        else:
            await asyncio.sleep(0.005)
    return task.result()
