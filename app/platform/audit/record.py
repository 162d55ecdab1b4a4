"""Writing one audit entry, in the caller's unit of work: the entry commits with the action it
records, or neither does."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.db.session import WriteSession
from app.platform.audit.models import AuditEntry
from app.platform.audit.origin import SYSTEM, Actor, current_origin
from app.platform.models import Workspace

SECRET_SET = "(set)"  # noqa: S105 - a placeholder, not a secret
"""What a secret's value reads as in ``before``/``after``: that it was set, never the value."""

_SECRET_WORDS = ("password", "secret", "token", "api_key", "ciphertext", "key_hash")
_MAX_TEXT = 2000


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``values`` as the log may keep them: a field whose name says it holds a secret reads
    ``(set)`` (or ``None`` when it is empty), long text is cut."""
    if values is None:
        return None
    out: dict[str, Any] = {}
    for name, value in values.items():
        if _is_secret(name):
            out[name] = SECRET_SET if value else None
        elif isinstance(value, Mapping):
            out[name] = redact(value)
        elif isinstance(value, str) and len(value) > _MAX_TEXT:
            out[name] = value[:_MAX_TEXT] + "…"
        else:
            out[name] = value
    return out


async def _organisation_of(session: WriteSession, workspace_id: int) -> int:
    org = await session.scalar(
        select(Workspace.organisation_id).where(Workspace.id == workspace_id)
    )
    if org is None:
        raise LookupError(f"workspace {workspace_id} does not exist")
    return int(org)


async def record(
    session: WriteSession,
    *,
    action: str,
    object_type: str,
    object_id: object,
    workspace_id: int | None = None,
    organisation_id: int | None = None,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    now: datetime,
    actor: Actor | None = None,
) -> AuditEntry:
    """Add one entry to the audit log in ``session``'s transaction.

    Args:
        action: What happened, ``<object>.<verb>`` (``api_key.created``).
        object_type: The kind of thing acted on (``api_key``); ``object_id`` its id.
        workspace_id: The workspace it happened in; ``None`` for organisation-level actions.
        organisation_id: Whose log it goes in; looked up from ``workspace_id`` when omitted.
        before: For changes of settings, the values before (secrets only as ``(set)``).
        after: The values after, likewise.
        now: When it happened (the caller's clock).
        actor: Who did it; by default the request's caller, or the system outside a request.
    """
    if organisation_id is None:
        if workspace_id is None:
            raise ValueError("an audit entry needs an organisation or a workspace")
        organisation_id = await _organisation_of(session, workspace_id)
    origin = current_origin()
    who = actor or (origin.principal() if origin is not None else None) or SYSTEM
    address, user_agent = origin.where() if origin is not None else ("", "")
    entry = AuditEntry(
        organisation_id=organisation_id,
        workspace_id=workspace_id,
        at=now,
        actor_kind=who.kind,
        user_id=who.user_id,
        api_key_id=who.api_key_id,
        client_address=address[:64],
        user_agent=user_agent[:400],
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:255],
        before=redact(before),
        after=redact(after),
    )
    session.add(entry)
    return entry
