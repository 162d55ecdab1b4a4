"""First run: the instance's first organisation, workspace and owner.

Until someone owns the instance, the dashboard leads to a setup page. A stranger who reaches the
port first must not be able to take the instance, so the page asks for the *setup token*: derived
from the instance's session secret (so ``serve`` and ``python -m app setup-token`` agree without
storing anything), printed in the log at start. Once an owner exists the page is gone for good
(the ``instance_setup`` row, whose fixed key also makes two concurrent setups collide).

The same :func:`create_owner` serves the CLI's ``create-admin`` for scripted installs.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, ValidationFailed
from app.platform import service
from app.platform.crypto import SecretBox
from app.platform.models import InstanceSetup, User

SETUP_TOKEN_PREFIX = "swsetup_"  # noqa: S105 - a prefix, not a secret


def setup_token(session_secret: str) -> str:
    """The instance's setup token (stable for the instance, useless once it has an owner)."""
    digest = hmac.new(session_secret.encode(), b"sweepline first-run setup", hashlib.sha256)
    return SETUP_TOKEN_PREFIX + digest.hexdigest()[:32]


def token_matches(session_secret: str, given: str) -> bool:
    return hmac.compare_digest(setup_token(session_secret), given.strip())


async def needs_setup(session: ReadSession) -> bool:
    """True while nobody can sign in: no setup was completed and no person exists."""
    if await session.get(InstanceSetup, 1) is not None:
        return False
    return not await session.scalar(select(func.count()).select_from(User))


@dataclass(frozen=True, slots=True)
class NewOwner:
    user: User
    workspace: service.NewWorkspace


def _required(field: str, value: str, limit: int = 200) -> str:
    value = value.strip()
    if not value:
        raise ValidationFailed.field(field, "is required")
    if len(value) > limit:
        raise ValidationFailed.field(field, f"must be at most {limit} characters")
    return value


async def create_owner(
    session: WriteSession,
    box: SecretBox,
    *,
    organisation: str,
    workspace: str,
    email: str,
    password: str,
    now: datetime,
    name: str = "",
    timezone: str = "UTC",
) -> NewOwner:
    """A new organisation with its first workspace, owned by a new person (workspace admin too).

    Marks the instance as set up. Fails with ``email_taken`` when the e-mail has an account.
    """
    org_name = _required("organisation", organisation)
    ws_name = _required("workspace", workspace)
    service.check_password(password)
    org = await service.create_organisation(session, name=org_name, now=now)
    created = await service.create_workspace(
        session, box, organisation_id=org.id, name=ws_name, now=now, timezone=timezone
    )
    user = await service.create_user(
        session,
        organisation_id=org.id,
        email=email,
        password=password,
        now=now,
        name=name.strip()[:200],
        org_role="owner",
    )
    await service.add_member(
        session, user_id=user.id, workspace_id=created.workspace.id, role="admin"
    )
    if await session.get(InstanceSetup, 1) is None:
        session.add(InstanceSetup(id=1, completed_at=now))
    return NewOwner(user, created)


async def complete_first_run(
    session: WriteSession,
    box: SecretBox,
    *,
    organisation: str,
    workspace: str,
    email: str,
    password: str,
    now: datetime,
    name: str = "",
) -> NewOwner:
    """The setup page's action: :func:`create_owner`, only while the instance has no owner.

    A second setup racing this one meets the ``instance_setup`` row's fixed key and fails.
    """
    if not await needs_setup(session):
        raise Conflict("this instance is already set up", code="already_set_up")
    session.add(InstanceSetup(id=1, completed_at=now))
    try:
        await session.flush()
    except IntegrityError as exc:
        raise Conflict("this instance is already set up", code="already_set_up") from exc
    return await create_owner(
        session,
        box,
        organisation=organisation,
        workspace=workspace,
        email=email,
        password=password,
        now=now,
        name=name,
    )
