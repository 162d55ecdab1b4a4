"""The ad-rules test builders and fixtures: the Graph API simulator (one server per session, a fresh
world per test), settings pointing at it, a Graph client on them, and factories for workspaces,
accounts, rules and dispatch dependencies. ``conftest.py`` re-exports the fixtures; browser tests
import them from here."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import msgspec
import pytest

from app.clock import ManualClock
from app.engines.adrules import accounts as account_service
from app.engines.adrules import rules as rule_service
from app.engines.adrules.deps import AdRulesDeps
from app.engines.adrules.models import AdAccount
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.schemas import RuleIn
from app.integrations.http_guard import shared_guard
from app.integrations.meta.client import GraphClient
from app.platform import service as platform_service
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, serve_world
from app.scheduling.jobs import JobContext, JobSpec
from app.scheduling.queue import DatabaseQueue, JobQueue
from app.settings import Settings

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
    """The suite's settings with the Graph API pointed at the simulator."""
    integrations = dataclasses.replace(
        settings.integrations, meta_graph_url=graph_server.base_url, meta_graph_version="v21.0"
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


class RecordingSleep:
    """An injectable sleep that records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


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
