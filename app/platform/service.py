"""Tenancy operations: organisations, workspaces, members, API keys and secrets (dashboard
sessions: :mod:`app.platform.sessions`).

Services never commit: the caller's unit of work does.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select

from app.db import keyset
from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit
from app.platform.crypto import SecretBox
from app.platform.models import (
    API_KEY_SCOPES,
    ORG_MANAGERS,
    ORG_ROLES,
    ROLES,
    ApiKey,
    Membership,
    Organisation,
    Secret,
    User,
    Workspace,
)
from app.platform.tokens import (
    hash_password,
    key_prefix,
    new_api_key,
    new_ingest_token,
    sha256_hex,
)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, and in which workspace. Every engine query is scoped by ``workspace_id``."""

    workspace_id: int
    organisation_id: int
    role: str
    """The role in the workspace (``admin`` or ``member``)."""
    user_id: int | None = None
    api_key_id: int | None = None
    org_role: str | None = None
    """The person's role in the organisation; None for an API key, which acts in its workspace
    only and never on the organisation (balance, AI quota, people)."""
    scope: str = "write"
    """An API key's scope: ``read`` keys may only read."""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def manages_organisation(self) -> bool:
        return self.user_id is not None and self.org_role in ORG_MANAGERS


@dataclass(frozen=True, slots=True)
class NewWorkspace:
    workspace: Workspace
    ingest_token: str
    webhook_secret: str


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


async def create_organisation(session: WriteSession, *, name: str, now: datetime) -> Organisation:
    org = Organisation(name=name, created_at=now)
    session.add(org)
    await session.flush()
    return org


async def create_workspace(
    session: WriteSession,
    box: SecretBox,
    *,
    organisation_id: int,
    name: str,
    now: datetime,
    timezone: str = "UTC",
) -> NewWorkspace:
    token = new_ingest_token()
    webhook_secret = secrets.token_urlsafe(32)
    ws = Workspace(
        organisation_id=organisation_id,
        name=name,
        timezone=timezone,
        ingest_token_hash=sha256_hex(token),
        webhook_secret_encrypted=box.encrypt(webhook_secret),
        allow_private_http=False,
        created_at=now,
    )
    session.add(ws)
    await session.flush()
    return NewWorkspace(ws, token, webhook_secret)


async def create_user(
    session: WriteSession,
    *,
    organisation_id: int,
    email: str,
    password: str,
    now: datetime,
    name: str = "",
    org_role: str = "member",
) -> User:
    email = normalise_email(email)
    check_password(password)
    if org_role not in ORG_ROLES:
        raise ValidationFailed.field("org_role", f"must be one of {', '.join(ORG_ROLES)}")
    exists = await session.scalar(select(User.id).where(User.email == email))
    if exists is not None:
        raise Conflict(f"a user with e-mail {email} exists", code="email_taken")
    user = User(
        organisation_id=organisation_id,
        email=email,
        name=name,
        password_hash=await asyncio.to_thread(hash_password, password),
        org_role=org_role,
        created_at=now,
    )
    session.add(user)
    await session.flush()
    return user


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(email: str) -> str:
    """The form an e-mail address is stored and compared in (trimmed, lower case)."""
    email = email.strip().lower()
    if len(email) > 320 or not _EMAIL.match(email):
        raise ValidationFailed.field("email", "not an e-mail address")
    return email


def check_password(password: str) -> None:
    if len(password) < 8:
        raise ValidationFailed.field("password", "must be at least 8 characters")
    if len(password) > 200:
        raise ValidationFailed.field("password", "must be at most 200 characters")


async def add_member(session: WriteSession, *, user_id: int, workspace_id: int, role: str) -> None:
    if role not in ROLES:
        raise ValidationFailed.field("role", f"must be one of {', '.join(ROLES)}")
    session.add(Membership(user_id=user_id, workspace_id=workspace_id, role=role))
    await session.flush()


async def get_workspace(session: ReadSession, workspace_id: int) -> Workspace:
    ws = await session.get(Workspace, workspace_id)
    if ws is None:
        raise NotFound("workspace not found")
    return ws


async def workspace_members(
    session: ReadSession, workspace_id: int, *, limit: int = 200, after_user_id: int | None = None
) -> list[tuple[User, str]]:
    """Up to ``limit + 1`` members with their role, by user id."""
    query = (
        select(User, Membership.role)
        .join(Membership, Membership.user_id == User.id)
        .where(Membership.workspace_id == workspace_id)
    )
    if after_user_id is not None:
        query = query.where(keyset.after(User.id, after_user_id))
    rows = await session.execute(query.order_by(User.id).limit(limit + 1))
    return [(u, r) for u, r in rows.all()]


# -- API keys ----------------------------------------------------------------------------------


async def create_api_key(
    session: WriteSession,
    *,
    workspace_id: int,
    name: str,
    now: datetime,
    scope: str = "write",
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; the raw key is returned once and only its hash is stored."""
    if scope not in API_KEY_SCOPES:
        raise ValidationFailed.field("scope", f"must be one of {', '.join(API_KEY_SCOPES)}")
    if expires_at is not None and expires_at <= now:
        raise ValidationFailed.field("expires_at", "must be in the future")
    raw = new_api_key()
    key = ApiKey(
        workspace_id=workspace_id,
        name=name,
        prefix=key_prefix(raw),
        key_hash=sha256_hex(raw),
        scope=scope,
        expires_at=expires_at,
        created_at=now,
    )
    session.add(key)
    await session.flush()
    await audit.record(
        session,
        action="api_key.created",
        object_type="api_key",
        object_id=key.id,
        workspace_id=workspace_id,
        after={"name": name, "prefix": key.prefix, "scope": scope, "expires_at": _iso(expires_at)},
        now=now,
    )
    return key, raw


async def list_api_keys(
    session: ReadSession, workspace_id: int, *, limit: int, after_id: int | None = None
) -> list[ApiKey]:
    """Up to ``limit + 1`` keys in creation order (the extra one tells the caller there is more)."""
    query = select(ApiKey).where(ApiKey.workspace_id == workspace_id)
    if after_id is not None:
        query = query.where(keyset.after(ApiKey.id, after_id))
    rows = await session.execute(query.order_by(ApiKey.id).limit(limit + 1))
    return list(rows.scalars())


async def get_api_key(session: ReadSession, *, workspace_id: int, key_id: int) -> ApiKey:
    key = await session.scalar(
        select(ApiKey).where(ApiKey.id == key_id, ApiKey.workspace_id == workspace_id)
    )
    if key is None:
        raise NotFound("API key not found")
    return key


async def revoke_api_key(
    session: WriteSession, *, workspace_id: int, key_id: int, now: datetime
) -> None:
    key = await get_api_key(session, workspace_id=workspace_id, key_id=key_id)
    if key.revoked_at is not None:
        return  # already revoked: nothing happened now
    key.revoked_at = now
    await audit.record(
        session,
        action="api_key.revoked",
        object_type="api_key",
        object_id=key.id,
        workspace_id=workspace_id,
        before={"name": key.name, "prefix": key.prefix},
        now=now,
    )


async def principal_for_api_key(session: ReadSession, raw: str, now: datetime) -> Principal | None:
    """The principal of a key that is known, not revoked and not expired."""
    row = (
        await session.execute(
            select(ApiKey, Workspace.organisation_id)
            .join(Workspace, Workspace.id == ApiKey.workspace_id)
            .where(
                ApiKey.key_hash == sha256_hex(raw),
                ApiKey.revoked_at.is_(None),
                (ApiKey.expires_at.is_(None)) | (ApiKey.expires_at > now),
            )
        )
    ).first()
    if row is None:
        return None
    key, org_id = row
    return Principal(
        workspace_id=key.workspace_id,
        organisation_id=org_id,
        role="admin",
        api_key_id=key.id,
        scope=key.scope,
    )


async def workspace_for_ingest_token(session: ReadSession, raw: str) -> Workspace | None:
    return await session.scalar(
        select(Workspace).where(Workspace.ingest_token_hash == sha256_hex(raw))
    )


async def rotate_ingest_token(session: WriteSession, workspace_id: int, *, now: datetime) -> str:
    ws = await session.get(Workspace, workspace_id)
    if ws is None:
        raise NotFound("workspace not found")
    token = new_ingest_token()
    ws.ingest_token_hash = sha256_hex(token)
    await _secret_event(session, "secret.rotated", workspace_id, "ingest_token", now)
    return token


async def rotate_webhook_secret(
    session: WriteSession, box: SecretBox, workspace_id: int, *, now: datetime
) -> str:
    """A new HMAC signing secret for the workspace's webhooks; the previous one stops working."""
    ws = await session.get(Workspace, workspace_id)
    if ws is None:
        raise NotFound("workspace not found")
    secret = secrets.token_urlsafe(32)
    ws.webhook_secret_encrypted = box.encrypt(secret)
    await _secret_event(session, "secret.rotated", workspace_id, "webhook_secret", now)
    return secret


async def _secret_event(
    session: WriteSession, action: str, workspace_id: int, name: str, now: datetime
) -> None:
    """A secret was set, rotated or removed: the log names it, never its value. (Stored secrets
    are write-only: no route reads one back to a person or a key, so there is no read to record.)"""
    await audit.record(
        session,
        action=action,
        object_type="secret",
        object_id=name,
        workspace_id=workspace_id,
        now=now,
    )


def webhook_secret(box: SecretBox, workspace: Workspace) -> str:
    return box.decrypt(workspace.webhook_secret_encrypted)


# -- secrets -----------------------------------------------------------------------------------


SECRET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"  # noqa: S105 - a name rule
_SECRET_NAME = re.compile(SECRET_NAME_PATTERN)


def validate_secret_name(name: str) -> str:
    if not _SECRET_NAME.match(name):
        raise ValidationFailed.field(
            "name",
            "1 to 100 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
        )
    return name


async def set_secret(
    session: WriteSession,
    box: SecretBox,
    *,
    workspace_id: int,
    name: str,
    value: str,
    now: datetime,
) -> None:
    """Store ``value`` encrypted under ``name`` (replacing an earlier value)."""
    validate_secret_name(name)
    row = await session.scalar(
        select(Secret).where(Secret.workspace_id == workspace_id, Secret.name == name)
    )
    if row is None:
        session.add(
            Secret(
                workspace_id=workspace_id, name=name, ciphertext=box.encrypt(value), updated_at=now
            )
        )
    else:
        row.ciphertext = box.encrypt(value)
        row.updated_at = now
    await session.flush()
    await _secret_event(session, "secret.set", workspace_id, name, now)


async def get_secret(
    session: ReadSession, box: SecretBox, *, workspace_id: int, name: str
) -> str | None:
    row = await session.scalar(
        select(Secret.ciphertext).where(Secret.workspace_id == workspace_id, Secret.name == name)
    )
    return None if row is None else box.decrypt(row)


async def secret_names(session: ReadSession, workspace_id: int) -> list[str]:
    rows = await session.execute(
        select(Secret.name).where(Secret.workspace_id == workspace_id).order_by(Secret.name)
    )
    return list(rows.scalars())


async def delete_secret(
    session: WriteSession, *, workspace_id: int, name: str, now: datetime
) -> None:
    result = await session.execute(
        delete(Secret).where(Secret.workspace_id == workspace_id, Secret.name == name)
    )
    if not getattr(result, "rowcount", 0):
        raise NotFound("secret not found")
    await _secret_event(session, "secret.deleted", workspace_id, name, now)
