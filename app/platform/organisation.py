"""An organisation's own management: its workspaces, its people and their organisation roles.

Only organisation owners and admins call these (the web layer checks it); only an owner may make
or unmake an owner, and an organisation always keeps one owner.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit, service
from app.platform.crypto import SecretBox
from app.platform.models import ORG_ROLES, Membership, User, UserSession, Workspace
from app.platform.tokens import hash_password


def _workspace_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 200:
        raise ValidationFailed.field("name", "must be 1 to 200 characters")
    return name


async def organisation_workspaces(session: ReadSession, organisation_id: int) -> list[Workspace]:
    rows = await session.scalars(
        select(Workspace)
        .where(Workspace.organisation_id == organisation_id)
        .order_by(Workspace.name, Workspace.id)
    )
    return list(rows)


async def org_workspace(session: ReadSession, organisation_id: int, workspace_id: int) -> Workspace:
    """A workspace of this organisation; another organisation's id is not found."""
    ws = await session.get(Workspace, workspace_id)
    if ws is None or ws.organisation_id != organisation_id:
        raise NotFound("workspace not found")
    return ws


async def create_workspace(
    session: WriteSession,
    box: SecretBox,
    *,
    organisation_id: int,
    creator_id: int,
    name: str,
    now: datetime,
    timezone: str = "UTC",
) -> service.NewWorkspace:
    """A new workspace; the person creating it becomes its admin. Its ingest token and webhook
    signing secret are in the result, to be shown once."""
    created = await service.create_workspace(
        session,
        box,
        organisation_id=organisation_id,
        name=_workspace_name(name),
        now=now,
        timezone=timezone,
    )
    await service.add_member(
        session, user_id=creator_id, workspace_id=created.workspace.id, role="admin"
    )
    ws = created.workspace
    after = {"name": ws.name, "timezone": ws.timezone}
    await _audit(
        session, "workspace.created", "workspace", ws.id, organisation_id, now, after=after
    )
    return created


async def _audit(
    session: WriteSession,
    action: str,
    object_type: str,
    object_id: int,
    organisation_id: int,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    workspace_id = object_id if object_type == "workspace" else None
    await audit.record(
        session,
        action=action,
        object_type=object_type,
        object_id=object_id,
        workspace_id=workspace_id,
        organisation_id=organisation_id,
        now=now,
        before=before,
        after=after,
    )


async def rename_workspace(
    session: WriteSession, *, organisation_id: int, workspace_id: int, name: str, now: datetime
) -> Workspace:
    ws = await org_workspace(session, organisation_id, workspace_id)
    before = {"name": ws.name}
    ws.name = _workspace_name(name)
    await session.flush()
    after = {"name": ws.name}
    await _audit(
        session,
        "workspace.renamed",
        "workspace",
        ws.id,
        organisation_id,
        now,
        before=before,
        after=after,
    )
    return ws


@dataclass(frozen=True, slots=True)
class Person:
    user: User
    workspaces: list[tuple[int, str]]
    """(workspace id, role) of each membership."""


async def people(session: ReadSession, organisation_id: int) -> list[Person]:
    users = list(
        await session.scalars(
            select(User).where(User.organisation_id == organisation_id).order_by(User.id)
        )
    )
    rows = await session.execute(
        select(Membership.user_id, Membership.workspace_id, Membership.role).where(
            Membership.user_id.in_([u.id for u in users])
        )
    )
    by_user: dict[int, list[tuple[int, str]]] = {}
    for user_id, workspace_id, role in rows.all():
        by_user.setdefault(user_id, []).append((workspace_id, role))
    return [Person(u, sorted(by_user.get(u.id, []))) for u in users]


async def _org_user(session: ReadSession, organisation_id: int, user_id: int) -> User:
    user = await session.get(User, user_id)
    if user is None or user.organisation_id != organisation_id:
        raise NotFound("person not found")
    return user


async def _owners_locked(session: WriteSession, organisation_id: int) -> int:
    ids = await session.scalars(
        select(User.id)
        .where(User.organisation_id == organisation_id, User.org_role == "owner")
        .with_for_update()
    )
    return len(list(ids))


async def set_org_role(
    session: WriteSession,
    *,
    organisation_id: int,
    actor_role: str,
    user_id: int,
    role: str,
    now: datetime,
) -> User:
    if role not in ORG_ROLES:
        raise ValidationFailed.field("role", f"must be one of {', '.join(ORG_ROLES)}")
    user = await _org_user(session, organisation_id, user_id)
    if "owner" in (role, user.org_role) and actor_role != "owner":
        raise Conflict("only an owner may make or unmake an owner", code="owner_required")
    if (
        user.org_role == "owner"
        and role != "owner"
        and await _owners_locked(session, organisation_id) <= 1
    ):
        raise Conflict("an organisation needs at least one owner", code="last_owner")
    before = {"org_role": user.org_role, "email": user.email}
    user.org_role = role
    await session.flush()
    after = {"org_role": role, "email": user.email}
    await _audit(
        session,
        "member.org_role_changed",
        "user",
        user.id,
        organisation_id,
        now,
        before=before,
        after=after,
    )
    return user


async def remove_person(
    session: WriteSession,
    *,
    organisation_id: int,
    actor_id: int,
    actor_role: str,
    user_id: int,
    now: datetime,
) -> None:
    """Remove a person from the organisation: their account, memberships and sessions end."""
    if user_id == actor_id:
        raise Conflict("you cannot remove yourself", code="self_removal")
    user = await _org_user(session, organisation_id, user_id)
    if user.org_role == "owner" and actor_role != "owner":
        raise Conflict("only an owner may remove an owner", code="owner_required")
    await session.execute(delete(UserSession).where(UserSession.user_id == user_id))
    await session.execute(delete(Membership).where(Membership.user_id == user_id))
    await session.delete(user)
    await session.flush()
    before = {"email": user.email, "org_role": user.org_role}
    await _audit(session, "member.removed", "user", user_id, organisation_id, now, before=before)


async def reset_password(session: WriteSession, *, email: str, password: str) -> int:
    """Set a new password for the account with this e-mail; every session of it ends. Returns
    the number of sessions ended."""
    service.check_password(password)
    user = await session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None:
        raise NotFound(f"no account has the e-mail {email.strip().lower()}")
    hashed = await asyncio.to_thread(hash_password, password)
    await session.execute(update(User).where(User.id == user.id).values(password_hash=hashed))
    ended = await session.scalar(
        select(func.count()).select_from(UserSession).where(UserSession.user_id == user.id)
    )
    await session.execute(delete(UserSession).where(UserSession.user_id == user.id))
    return int(ended or 0)
