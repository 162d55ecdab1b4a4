"""What suppression keeps of an erased contact: a keyed hash of their address, never the address.

Deleting a contact erases their e-mail address and phone number. If the address had bounced,
complained or unsubscribed, forgetting that would let the next import of the same address be
mailed again. So before the address is erased its suppression entries are stored against
``HMAC-SHA256(instance key, address)`` — the instance's encryption key, derived for this one
purpose, so the stored value cannot be reversed or matched against a list of addresses without
the key — and every sender checks the recipient's hash at send time, whatever created the new
contact (the API, an import, an event, a form).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.engines.funnels.models import Contact, ErasedAddress

PURPOSE = "funnels.erased-address"
"""What the instance key is derived for (see :meth:`app.platform.crypto.SecretBox.derive`)."""

EMAIL = "email"
PHONE = "phone"


def _normalise(kind: str, value: str) -> str:
    if kind == PHONE:
        return re.sub(r"[^\d+]", "", value)
    return value.strip().lower()


def digest(key: bytes, kind: str, value: str) -> str:
    return hmac.new(key, f"{kind}:{_normalise(kind, value)}".encode(), hashlib.sha256).hexdigest()


def _entries(kind: str, suppressed: dict[str, str]) -> dict[str, str]:
    """The suppression entries that belong to the address of ``kind``."""
    if kind == EMAIL:
        # The channel itself (everything, a bounce, a complaint) and each topic left.
        return {k: v for k, v in suppressed.items() if k == "email" or k.startswith("topic:")}
    return {k: v for k, v in suppressed.items() if k == "sms"}


async def remember(session: WriteSession, key: bytes, contact: Contact, now: datetime) -> None:
    """Keep the contact's suppression under the hashes of their addresses (before erasure)."""
    suppressed = dict(contact.suppressed or {})
    for kind, value in ((EMAIL, contact.email), (PHONE, contact.phone)):
        entries = _entries(kind, suppressed)
        if not value or not entries:
            continue
        hashed = digest(key, kind, value)
        row = await session.get(ErasedAddress, (contact.workspace_id, kind, hashed))
        if row is None:
            session.add(
                ErasedAddress(
                    workspace_id=contact.workspace_id,
                    kind=kind,
                    digest=hashed,
                    suppressed=entries,
                    created_at=now,
                )
            )
        else:
            row.suppressed = {**(row.suppressed or {}), **entries}
    await session.flush()


async def recall(
    session: ReadSession, key: bytes, contacts: Iterable[Any]
) -> dict[int, dict[str, str]]:
    """The remembered suppression of each contact's addresses, by contact id (contacts whose
    addresses were never erased while suppressed are absent). ``contacts`` need ``id``,
    ``workspace_id``, ``email`` and ``phone``."""
    wanted: dict[tuple[int, str, str], list[int]] = {}
    for c in contacts:
        for kind, value in ((EMAIL, c.email), (PHONE, c.phone)):
            if value:
                wanted.setdefault((c.workspace_id, kind, digest(key, kind, value)), []).append(c.id)
    if not wanted:
        return {}
    rows = await session.scalars(
        select(ErasedAddress).where(
            ErasedAddress.workspace_id.in_({ws for ws, _, _ in wanted}),
            ErasedAddress.digest.in_({d for _, _, d in wanted}),
        )
    )
    found: dict[int, dict[str, str]] = {}
    for row in rows:
        for contact_id in wanted.get((row.workspace_id, row.kind, row.digest), []):
            found.setdefault(contact_id, {}).update(row.suppressed or {})
    return found
