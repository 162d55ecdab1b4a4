"""Managing who belongs to a workspace: adding people, changing roles, removing them.

A workspace always keeps at least one admin. The admin rows are locked while that rule is checked,
so two admins demoting each other at the same moment cannot leave the workspace without one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select

from app.db.session import WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit
from app.platform.models import ROLES, Membership, User, UserSession, Workspace
from app.platform.service import create_user


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValidationFailed.field("role", f"must be one of {', '.join(ROLES)}")


async def _membership(session: WriteSession, workspace_id: int, user_id: int) -> Membership:
    row = await session.scalar(
        select(Membership).where(
            Membership.workspace_id == workspace_id, Membership.user_id == user_id
        )
    )
    if row is None:
        raise NotFound("member not found")
    return row


async def _admins_locked(session: WriteSession, workspace_id: int) -> int:
    ids = await session.scalars(
        select(Membership.id)
        .where(Membership.workspace_id == workspace_id, Membership.role == "admin")
        .with_for_update()
    )
    return len(list(ids))


async def add_member(
    session: WriteSession,
    *,
    workspace_id: int,
    email: str,
    role: str,
    now: datetime,
    password: str | None = None,
    name: str = "",
) -> tuple[User, str]:
    """Add a person of the workspace's organisation, creating the account when it is new
    (then ``password`` is required)."""
    _check_role(role)
    workspace = await session.get(Workspace, workspace_id)
    if workspace is None:
        raise NotFound("workspace not found")
    email = email.strip().lower()
    user = await session.scalar(select(User).where(User.email == email))
    if user is None:
        if not password:
            raise ValidationFailed.field("password", "is required for a new account")
        user = await create_user(
            session,
            organisation_id=workspace.organisation_id,
            email=email,
            password=password,
            now=now,
            name=name,
        )
    elif user.organisation_id != workspace.organisation_id:
        raise Conflict(f"a user with e-mail {email} exists", code="email_taken")
    elif await session.scalar(
        select(func.count())
        .select_from(Membership)
        .where(Membership.workspace_id == workspace_id, Membership.user_id == user.id)
    ):
        raise Conflict(f"{email} is already a member of this workspace", code="already_member")
    session.add(Membership(user_id=user.id, workspace_id=workspace_id, role=role))
    await session.flush()
    await _audit(session, "member.added", workspace_id, user, now, after={"role": role})
    return user, role


async def _audit(
    session: WriteSession,
    action: str,
    workspace_id: int,
    user: User,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    # The e-mail names the person after their account is gone (erasure redacts it, see
    # app.platform.audit).
    for values in (before, after):
        if values is not None:
            values["email"] = user.email
    await audit.record(
        session,
        action=action,
        object_type="user",
        object_id=user.id,
        workspace_id=workspace_id,
        organisation_id=user.organisation_id,
        now=now,
        before=before,
        after=after,
    )


async def set_role(
    session: WriteSession, *, workspace_id: int, user_id: int, role: str, now: datetime
) -> tuple[User, str]:
    _check_role(role)
    membership = await _membership(session, workspace_id, user_id)
    demoting = membership.role == "admin" and role != "admin"
    if demoting and await _admins_locked(session, workspace_id) <= 1:
        raise Conflict("a workspace needs at least one admin", code="last_admin")
    before = {"role": membership.role}
    membership.role = role
    await session.flush()
    user = await session.get(User, user_id)
    assert user is not None
    await _audit(
        session, "member.role_changed", workspace_id, user, now, before=before, after={"role": role}
    )
    return user, role


async def remove_member(
    session: WriteSession, *, workspace_id: int, user_id: int, now: datetime
) -> None:
    """Remove a person from the workspace; their sessions in it end at once."""
    membership = await _membership(session, workspace_id, user_id)
    if membership.role == "admin" and await _admins_locked(session, workspace_id) <= 1:
        raise Conflict("a workspace needs at least one admin", code="last_admin")
    await session.delete(membership)
    await session.execute(
        delete(UserSession).where(
            UserSession.user_id == user_id, UserSession.workspace_id == workspace_id
        )
    )
    await session.flush()
    user = await session.get(User, user_id)
    if user is not None:
        before = {"role": membership.role}
        await _audit(
            session, "member.removed_from_workspace", workspace_id, user, now, before=before
        )
