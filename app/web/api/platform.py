"""Platform API: the calling workspace, its API keys, secrets, members, ingest token, queue and
sweepers. Every query is scoped by the API key's workspace; another workspace's id answers 404."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import Response, delete, get, patch, post, put
from litestar.params import FromPath, JSONBody, Parameter

from app.db.session import UnitOfWork
from app.engines.adrules import rules as adrules_rules
from app.errors import Conflict, ValidationFailed
from app.pagination import Page, page_of
from app.platform import members, organisation, service, workspace_zone
from app.platform.models import ApiKey, User
from app.schemas import Schema
from app.web.access import Auth, authenticated
from app.web.api.common import Once, api_router
from app.web.auth import (
    CurrentPrincipal,
    CurrentRuntime,
    require_admin,
    require_operator,
    require_organisation_manager,
)
from app.web.deps import CurrentClock, Paging, Queue, Reads, Secrets, Writes
from app.web.ops import sweeper_overview

Role = Annotated[str, msgspec.Meta(pattern="^(admin|member)$", max_length=6)]


class WorkspaceOut(Schema):
    id: int
    organisation_id: int
    name: str
    timezone: str
    role: str


class ApiKeyIn(Schema):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    scope: Literal["read", "write"] = "write"
    """``read`` keys may only call GET endpoints; ``write`` keys may also change things."""
    expires_at: datetime | None = None
    """When the key stops working (UTC); none: it works until revoked."""


class ApiKeyOut(Schema):
    id: int
    name: str
    prefix: str
    scope: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None


class NewApiKeyOut(ApiKeyOut, kw_only=True):
    key: str
    """The key itself. It is shown in this response only; store it now."""


class SecretIn(Schema):
    value: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]


class SecretNames(Schema):
    names: list[str]


class MemberIn(Schema):
    email: Annotated[str, msgspec.Meta(min_length=3, max_length=320)]
    role: Role
    password: Annotated[str, msgspec.Meta(min_length=8, max_length=200)] | None = None
    """Required when the e-mail has no account yet."""
    name: Annotated[str, msgspec.Meta(max_length=200)] = ""


class MemberRoleIn(Schema):
    role: Role


class MemberOut(Schema):
    user_id: int
    email: str
    name: str
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
    schedule: str
    last_tick_at: datetime | None
    last_duration_ms: int | None
    last_lag_ms: int | None
    last_error: str | None
    ticks: int
    failures: int
    running: bool


class WorkspaceRenameIn(Schema):
    """Change the workspace's name, its time zone, or both (at least one)."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    """An IANA zone name (``Europe/Berlin``): where a schedule names no zone, its times, date
    windows and "today" follow this one."""


class SigningSecretOut(Schema):
    webhook_secret: str
    """The new HMAC signing secret, shown once. The previous one stops working."""


class IngestTokenOut(Schema):
    ingest_token: str
    """The new token. The previous one stops working at once."""


def _key_out(key: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=key.id,
        name=key.name,
        prefix=key.prefix,
        scope=key.scope,
        created_at=key.created_at,
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
    )


def _member_out(user: User, role: str) -> MemberOut:
    return MemberOut(user_id=user.id, email=user.email, name=user.name, role=role)


@get("/workspace")
async def get_workspace(principal: CurrentPrincipal, session: Reads) -> WorkspaceOut:
    ws = await service.get_workspace(session, principal.workspace_id)
    return WorkspaceOut(
        id=ws.id,
        organisation_id=ws.organisation_id,
        name=ws.name,
        timezone=ws.timezone,
        role=principal.role,
    )


@patch("/workspace")
async def rename_workspace(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: JSONBody[WorkspaceRenameIn]
) -> WorkspaceOut:
    """Rename the key's workspace or set its time zone (workspace admins; a ``write`` key)."""
    require_admin(principal)
    if data.name is None and data.timezone is None:
        raise ValidationFailed.field(
            "name", "give a new name, a time zone (timezone), or both", code="required"
        )
    if data.timezone is not None:
        ws = await workspace_zone.set_workspace_timezone(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=principal.workspace_id,
            timezone=data.timezone,
            now=clock.now(),
        )
        await adrules_rules.workspace_zone_changed(
            uow.session, workspace_id=ws.id, timezone=ws.timezone, now=clock.now()
        )
    if data.name is not None:
        ws = await organisation.rename_workspace(
            uow.session,
            organisation_id=principal.organisation_id,
            workspace_id=principal.workspace_id,
            name=data.name,
            now=clock.now(),
        )
    return WorkspaceOut(
        id=ws.id,
        organisation_id=ws.organisation_id,
        name=ws.name,
        timezone=ws.timezone,
        role=principal.role,
    )


# -- API keys ----------------------------------------------------------------------------------


@get("/api-keys")
async def list_keys(principal: CurrentPrincipal, session: Reads, paging: Paging) -> Page[ApiKeyOut]:
    """The workspace's keys, revoked ones included. The keys themselves are never listed."""
    keys = await service.list_api_keys(
        session, principal.workspace_id, limit=paging.limit, after_id=paging.after
    )
    return page_of([_key_out(k) for k in keys], paging.limit)


@post("/api-keys")
async def create_key(
    principal: CurrentPrincipal, once: Once, clock: CurrentClock, data: JSONBody[ApiKeyIn]
) -> Response[NewApiKeyOut]:
    """Create a key; the response is the only place the key is shown. Accepts an
    ``Idempotency-Key`` header: a retry gets the same answer and creates no second key."""
    require_admin(principal)

    async def action(uow: UnitOfWork) -> NewApiKeyOut:
        key, raw = await service.create_api_key(
            uow.session,
            workspace_id=principal.workspace_id,
            name=data.name,
            now=clock.now(),
            scope=data.scope,
            expires_at=data.expires_at,
        )
        return NewApiKeyOut(**msgspec.structs.asdict(_key_out(key)), key=raw)

    return await once(action)


@get("/api-keys/{key_id:int}")
async def get_key(principal: CurrentPrincipal, session: Reads, key_id: FromPath[int]) -> ApiKeyOut:
    key = await service.get_api_key(session, workspace_id=principal.workspace_id, key_id=key_id)
    return _key_out(key)


@delete("/api-keys/{key_id:int}")
async def revoke_key(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, key_id: FromPath[int]
) -> None:
    """Revoke a key: requests made with it answer 401 from now on. A key cannot revoke itself
    (409 ``own_key``): a program would lock itself out with the request it is answering."""
    require_admin(principal)
    if principal.api_key_id == key_id:
        raise Conflict(
            "An API key cannot revoke itself; revoke it with another key or in the dashboard",
            code="own_key",
        )
    await service.revoke_api_key(
        uow.session, workspace_id=principal.workspace_id, key_id=key_id, now=clock.now()
    )


# -- secrets -----------------------------------------------------------------------------------


@get("/secrets")
async def list_secrets(principal: CurrentPrincipal, session: Reads) -> SecretNames:
    """Names only: secret values are never returned."""
    return SecretNames(names=await service.secret_names(session, principal.workspace_id))


SecretName = Annotated[
    str,
    Parameter(
        description="1 to 100 letters, digits, ``_``, ``.``, ``:`` or ``-``, a letter or digit first.",
        schema_extra={"pattern": service.SECRET_NAME_PATTERN},
    ),
]


@put("/secrets/{name:str}")
async def put_secret(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    secrets: Secrets,
    name: SecretName,
    data: JSONBody[SecretIn],
) -> SecretNames:
    """Store a secret encrypted; the value is never returned."""
    require_admin(principal)
    await service.set_secret(
        uow.session,
        secrets,
        workspace_id=principal.workspace_id,
        name=name,
        value=data.value,
        now=clock.now(),
    )
    return SecretNames(names=await service.secret_names(uow.session, principal.workspace_id))


@delete("/secrets/{name:str}")
async def delete_secret(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, name: FromPath[str]
) -> None:
    require_admin(principal)
    await service.delete_secret(
        uow.session, workspace_id=principal.workspace_id, name=name, now=clock.now()
    )


# -- members -----------------------------------------------------------------------------------


@get("/members")
async def list_members(
    principal: CurrentPrincipal, session: Reads, paging: Paging
) -> Page[MemberOut]:
    rows = await service.workspace_members(
        session, principal.workspace_id, limit=paging.limit, after_user_id=paging.after
    )
    return page_of([_member_out(u, r) for u, r in rows], paging.limit, lambda m: m.user_id)


@post("/members")
async def add_member(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, data: JSONBody[MemberIn]
) -> MemberOut:
    """Add a person of the organisation to the workspace (a new account needs ``password``).
    People are an organisation-level matter: a signed-in organisation owner or admin may do
    this, a workspace API key never (403); invitations are sent from the dashboard."""
    require_organisation_manager(principal)
    require_admin(principal)
    user, role = await members.add_member(
        uow.session,
        workspace_id=principal.workspace_id,
        email=data.email,
        role=data.role,
        password=data.password,
        name=data.name,
        now=clock.now(),
    )
    return _member_out(user, role)


@patch("/members/{user_id:int}")
async def change_role(
    principal: CurrentPrincipal,
    uow: Writes,
    clock: CurrentClock,
    user_id: FromPath[int],
    data: JSONBody[MemberRoleIn],
) -> MemberOut:
    require_organisation_manager(principal)
    require_admin(principal)
    user, role = await members.set_role(
        uow.session,
        workspace_id=principal.workspace_id,
        user_id=user_id,
        role=data.role,
        now=clock.now(),
    )
    return _member_out(user, role)


@delete("/members/{user_id:int}")
async def remove_member(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock, user_id: FromPath[int]
) -> None:
    require_organisation_manager(principal)
    require_admin(principal)
    await members.remove_member(
        uow.session, workspace_id=principal.workspace_id, user_id=user_id, now=clock.now()
    )


# -- ingest token, queue, sweepers ---------------------------------------------------------------


@post("/ingest-token/rotate")
async def rotate_ingest(
    principal: CurrentPrincipal, uow: Writes, clock: CurrentClock
) -> IngestTokenOut:
    """Issue a new ingest token for webhook senders; the previous token stops working."""
    require_admin(principal)
    token = await service.rotate_ingest_token(uow.session, principal.workspace_id, now=clock.now())
    return IngestTokenOut(ingest_token=token)


@post("/webhook-secret/rotate")
async def rotate_signing_secret(
    principal: CurrentPrincipal, uow: Writes, secrets: Secrets, clock: CurrentClock
) -> SigningSecretOut:
    """Issue a new webhook signing secret (shown in this response only); signatures made with
    the previous one stop verifying, and so do the site key and tracked links signed with it."""
    require_admin(principal)
    secret = await service.rotate_webhook_secret(
        uow.session, secrets, principal.workspace_id, now=clock.now()
    )
    return SigningSecretOut(webhook_secret=secret)


# The instance's operators read these signed in to the dashboard, so the session is accepted.
OPERATORS = authenticated(Auth.API_KEY_OR_SESSION)


@get("/queue", opt=OPERATORS)
async def queue_state(principal: CurrentPrincipal, session: Reads, job_queue: Queue) -> QueueOut:
    """The job queue's depth and its latest dead jobs, for the instance's operators (PL-5)."""
    await require_operator(session, principal)
    stats = await job_queue.stats()
    dead = await job_queue.dead_jobs(20)
    return QueueOut(
        backend=job_queue.backend,
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


@get("/sweepers", opt=OPERATORS)
async def sweepers(
    principal: CurrentPrincipal, session: Reads, runtime: CurrentRuntime
) -> list[SweeperOut]:
    """Every sweep with its schedule and its last tick's time, duration, lag and error, for the
    instance's operators (PL-5)."""
    await require_operator(session, principal)
    return [
        SweeperOut(
            name=s.name,
            schedule=s.schedule,
            last_tick_at=s.last_tick_at,
            last_duration_ms=s.last_duration_ms,
            last_lag_ms=s.last_lag_ms,
            last_error=s.last_error,
            ticks=s.ticks,
            failures=s.failures,
            running=s.running,
        )
        for s in await sweeper_overview(runtime)
    ]


ROUTERS = [
    api_router(
        "",
        [
            get_workspace,
            rename_workspace,
            list_keys,
            create_key,
            get_key,
            revoke_key,
            list_secrets,
            put_secret,
            delete_secret,
            list_members,
            add_member,
            change_role,
            remove_member,
            rotate_ingest,
            rotate_signing_secret,
            queue_state,
            sweepers,
        ],
    )
]
