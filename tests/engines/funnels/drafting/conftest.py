"""Fixtures of the drafting tests: the AI simulator (started once, reset before each test), a
workspace whose AI provider points at it, and the drafting dependencies over the test runtime."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import select

from app.engines.funnels.drafting.service import DraftingDeps
from app.engines.funnels.outside.config import configure
from app.integrations.http_guard import AddressGuard
from app.platform.models import Workspace
from app.runtime import Runtime
from app.sandbox.ai import AiSandbox
from app.sandbox.base import start_simulator
from app.settings import FunnelSettings
from tests.engines.funnels.factories import Space, space

__all__ = ["space"]

GUARD = AddressGuard(allow_private=True)
"""The operator allows private targets here, for the loopback simulator."""


@pytest.fixture(scope="session")
def session_ai() -> Iterator[AiSandbox]:
    sandbox = AiSandbox()
    server = start_simulator(sandbox)
    yield sandbox
    server.stop()


@pytest.fixture
def ai(session_ai: AiSandbox) -> AiSandbox:
    session_ai.reset()
    return session_ai


@dataclass
class Drafting:
    runtime: Runtime
    deps: DraftingDeps
    workspace_id: int
    organisation_id: int
    ai: AiSandbox


async def configure_ai(runtime: Runtime, ws: int, url: str) -> None:
    async with runtime.db.write() as uow:
        await configure(
            uow.session,
            runtime.secrets,
            GUARD,
            workspace_id=ws,
            kind="ai",
            shape="openai",
            base_url=url,
            options={"model": "gpt-4o-mini"},
            secret="sk-sandbox-ai",
            now=runtime.clock.now(),
        )


def drafting_deps(runtime: Runtime, **settings: object) -> DraftingDeps:
    return DraftingDeps(
        db=runtime.db,
        secrets=runtime.secrets,
        guard=GUARD,
        clock=runtime.clock,
        settings=FunnelSettings(**settings),  # type: ignore[arg-type]
    )


@pytest.fixture
async def drafting(runtime: Runtime, space: Space, ai: AiSandbox) -> Drafting:
    await configure_ai(runtime, space.workspace_id, ai.url)
    async with runtime.db.read() as session:
        org = await session.scalar(
            select(Workspace.organisation_id).where(Workspace.id == space.workspace_id)
        )
    assert org is not None
    return Drafting(
        runtime,
        drafting_deps(runtime, ai_draft_repair_rounds=2, ai_draft_timeout_seconds=5.0),
        space.workspace_id,
        org,
        ai,
    )
