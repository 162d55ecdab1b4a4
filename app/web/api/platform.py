"""Platform API: the calling workspace, its API keys, secrets, members, queue and sweepers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from litestar import delete, get, post, put
from litestar.params import FromPath, JSONBody

from app.platform import service
from app.scheduling.sweeper import sweeper_states
from app.schemas import Schema
from app.web.api.common import api_router
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
    require_admin,
)


class WorkspaceOut(Schema):
    id: int
    organisation_id: int
    name: str
    timezone: str
    role: str


class ApiKeyIn(Schema):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class ApiKeyOut(Schema):
    id: int
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None
    key: str | None = None
    """The key itself, present only in the response that created it."""


class SecretIn(Schema):
    value: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]


class SecretNames(Schema):
    names: list[str]


class MemberOut(Schema):
    user_id: int
    email: str
    role: str


class DeadJobOut(Schema):
    id: str
    name: str
    attempts: int
    last_error: str | None
    finished_at: datetime | None


class QueueOut(Schema):
    backend: str
    queued: int
    running: int
    dead: int
    dead_jobs: list[DeadJobOut]


class SweeperOut(Schema):
    name: str
    last_tick_at: datetime | None
    last_duration_ms: int | None
    last_lag_ms: int | None
    last_error: str | None
    ticks: int
    failures: int


class IngestTokenOut(Schema):
    ingest_token: str


@get("/workspace")
async def get_workspace(principal: CurrentPrincipal, runtime: CurrentRuntime) -> WorkspaceOut:
    async with runtime.db.read() as session:
        ws = await service.get_workspace(session, principal.workspace_id)
    return WorkspaceOut(
        id=ws.id,
        organisation_id=ws.organisation_id,
        name=ws.name,
        timezone=ws.timezone,
        role=principal.role,
    )


def _key_out(key: object, raw: str | None = None) -> ApiKeyOut:
    return ApiKeyOut(
        id=key.id,  # type: ignore[attr-defined]
        name=key.name,  # type: ignore[attr-defined]
        prefix=key.prefix,  # type: ignore[attr-defined]
        created_at=key.created_at,  # type: ignore[attr-defined]
        revoked_at=key.revoked_at,  # type: ignore[attr-defined]
        key=raw,
    )


@get("/api-keys")
async def list_keys(principal: CurrentPrincipal, runtime: CurrentRuntime) -> list[ApiKeyOut]:
    async with runtime.db.read() as session:
        keys = await service.list_api_keys(session, principal.workspace_id)
    return [_key_out(k) for k in keys]


@post("/api-keys")
async def create_key(
    principal: CurrentPrincipal, runtime: CurrentRuntime, data: JSONBody[ApiKeyIn]
) -> ApiKeyOut:
    require_admin(principal)
    async with runtime.db.write() as uow:
        key, raw = await service.create_api_key(
            uow.session,
            workspace_id=principal.workspace_id,
            name=data.name,
            now=runtime.clock.now(),
        )
    return _key_out(key, raw)


@delete("/api-keys/{key_id:int}")
async def revoke_key(
    principal: CurrentPrincipal, runtime: CurrentRuntime, key_id: FromPath[int]
) -> None:
    require_admin(principal)
    async with runtime.db.write() as uow:
        await service.revoke_api_key(
            uow.session, workspace_id=principal.workspace_id, key_id=key_id, now=runtime.clock.now()
        )


@get("/secrets")
async def list_secrets(principal: CurrentPrincipal, runtime: CurrentRuntime) -> SecretNames:
    async with runtime.db.read() as session:
        return SecretNames(names=await service.secret_names(session, principal.workspace_id))


@put("/secrets/{name:str}")
async def put_secret(
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    name: FromPath[str],
    data: JSONBody[SecretIn],
) -> SecretNames:
    """Store a secret encrypted; the value is never returned."""
    require_admin(principal)
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=principal.workspace_id,
            name=name[:100],
            value=data.value,
            now=runtime.clock.now(),
        )
        names = await service.secret_names(uow.session, principal.workspace_id)
    return SecretNames(names=names)


@get("/members")
async def list_members(principal: CurrentPrincipal, runtime: CurrentRuntime) -> list[MemberOut]:
    async with runtime.db.read() as session:
        rows = await service.workspace_members(session, principal.workspace_id)
    return [MemberOut(user_id=u.id, email=u.email, role=r) for u, r in rows]


@post("/ingest-token/rotate")
async def rotate_ingest(principal: CurrentPrincipal, runtime: CurrentRuntime) -> IngestTokenOut:
    require_admin(principal)
    async with runtime.db.write() as uow:
        token = await service.rotate_ingest_token(uow.session, principal.workspace_id)
    return IngestTokenOut(ingest_token=token)


@get("/queue")
async def queue_state(principal: CurrentPrincipal, runtime: CurrentRuntime) -> QueueOut:
    stats = await runtime.queue.stats()
    dead = await runtime.queue.dead_jobs(20)
    return QueueOut(
        backend=runtime.queue.backend,
        queued=stats.queued,
        running=stats.running,
        dead=stats.dead,
        dead_jobs=[
            DeadJobOut(
                id=d.id,
                name=d.name,
                attempts=d.attempts,
                last_error=d.last_error,
                finished_at=d.finished_at,
            )
            for d in dead
        ],
    )


@get("/sweepers")
async def sweepers(principal: CurrentPrincipal, runtime: CurrentRuntime) -> list[SweeperOut]:
    return [
        SweeperOut(
            name=s.name,
            last_tick_at=s.last_tick_at,
            last_duration_ms=s.last_duration_ms,
            last_lag_ms=s.last_lag_ms,
            last_error=s.last_error,
            ticks=s.ticks,
            failures=s.failures,
        )
        for s in await sweeper_states(runtime.db)
    ]


ROUTERS = [
    api_router(
        "",
        [
            get_workspace,
            list_keys,
            create_key,
            revoke_key,
            list_secrets,
            put_secret,
            list_members,
            rotate_ingest,
            queue_state,
            sweepers,
        ],
    )
]
