"""``Idempotency-Key`` support for state-changing requests an outside system may retry.

The first request with a key does its work and stores its answer in the same unit of work; a retry
with the same key and the same request gets the stored answer back and changes nothing; the same
key with a different request is refused with 409. Keys are per principal — the API key or the signed-in person that sent them — and
expire after a TTL: another key of the same workspace reusing an ``Idempotency-Key`` starts a
request of its own and is never answered the first caller's response.

Stored answers may hold a secret (``POST /api-keys`` answers the raw key once), so they are kept
encrypted with the instance's secret key, and the client's key is stored only as a SHA-256 of
(principal, key).

Two requests racing with one key cannot both do the work: the stored row is inserted before the
work runs, under a unique (workspace, key) index. On PostgreSQL the second insert waits for the
first transaction and then fails, on SQLite writers are serialised (``BEGIN IMMEDIATE``); either
way the loser re-reads the winner's answer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from app.db.session import Database, UnitOfWork
from app.errors import Conflict, ValidationFailed
from app.platform.crypto import SecretBox
from app.platform.models import IdempotencyRecord

HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_ATTEMPTS = 3


class IdempotencyKeyReused(Conflict):
    code = "idempotency_key_reused"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status_code: int
    body: bytes
    replayed: bool
    """True when this answer was stored by an earlier request with the same key."""


class _LostRace(Exception):
    """Another transaction stored the same key first; roll back and read its answer."""


def validate_key(key: str) -> str:
    """A key is 1-255 printable ASCII characters without spaces (e.g. a UUID)."""
    if not _KEY.match(key):
        raise ValidationFailed.field(
            HEADER, "must be 1 to 255 printable ASCII characters without spaces"
        )
    return key


def scoped_key(principal: str, key: str) -> str:
    """What is stored for ``key`` sent by ``principal`` (e.g. ``"api_key:12"``, ``"user:3"``)."""
    digest = hashlib.sha256()
    for part in (principal.encode(), key.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def fingerprint(method: str, path: str, body: bytes) -> str:
    """SHA-256 of the request. A JSON body is canonicalised (key order and spacing do not count)."""
    try:
        canonical = msgspec.json.encode(msgspec.json.decode(body), order="sorted") if body else b""
    except msgspec.DecodeError:
        canonical = body
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


async def run_once(
    db: Database,
    box: SecretBox,
    *,
    workspace_id: int,
    principal: str,
    key: str | None,
    request_hash: str,
    now: datetime,
    ttl: timedelta,
    status_code: int,
    action: Callable[[UnitOfWork], Awaitable[Any]],
    finish: Callable[[Any], Awaitable[Any]] | None = None,
) -> StoredResponse:
    """Run ``action`` in a unit of work at most once per (workspace, principal, key).

    ``action`` gets the unit of work (to write and enqueue jobs through) and returns the response
    value, which is encoded to JSON and stored with ``status_code``. Without a key the action simply
    runs. An action that raises stores nothing, so a retry runs it again.

    ``finish``, when given, runs once the action's unit of work has committed — for work that may
    only start after the commit, such as publishing to a separate broker — and returns the final
    response value from the action's one; that value is what is answered and stored (so a retry
    replays what really happened, not what was planned).
    """
    if key is None:
        async with db.write() as uow:
            value = await action(uow)
        if finish is not None:
            value = await finish(value)
        return StoredResponse(status_code, msgspec.json.encode(value), replayed=False)
    validate_key(key)
    stored_key = scoped_key(principal, key)
    for _ in range(_ATTEMPTS):
        try:
            stored, value = await _attempt(
                db, box, workspace_id, stored_key, request_hash, now, ttl, status_code, action
            )
        except _LostRace:
            continue
        if finish is None or stored.replayed:
            return stored
        return await _finish(db, box, workspace_id, stored_key, stored, await finish(value))
    raise Conflict(
        "A request with this Idempotency-Key is still being processed; retry later.",
        code="idempotency_key_in_use",
    )


def _seal(box: SecretBox, body: bytes) -> bytes:
    return box.encrypt(body.decode())


def _open(box: SecretBox, sealed: bytes) -> bytes:
    return box.decrypt(sealed).encode()


async def _finish(
    db: Database,
    box: SecretBox,
    workspace_id: int,
    key: str,
    stored: StoredResponse,
    value: Any,
) -> StoredResponse:
    """Store the final answer ``value`` in place of the one committed with the work."""
    body = msgspec.json.encode(value)
    if body != stored.body:
        async with db.write() as uow:
            await uow.session.execute(
                update(IdempotencyRecord)
                .where(IdempotencyRecord.workspace_id == workspace_id, IdempotencyRecord.key == key)
                .values(response_body=_seal(box, body))
            )
    return StoredResponse(stored.status_code, body, replayed=False)


async def _attempt(
    db: Database,
    box: SecretBox,
    workspace_id: int,
    key: str,
    request_hash: str,
    now: datetime,
    ttl: timedelta,
    status_code: int,
    action: Callable[[UnitOfWork], Awaitable[Any]],
) -> tuple[StoredResponse, Any]:
    async with db.write() as uow:
        session = uow.session
        await session.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.workspace_id == workspace_id, IdempotencyRecord.expires_at <= now
            )
        )
        stored = await session.scalar(
            select(IdempotencyRecord).where(
                IdempotencyRecord.workspace_id == workspace_id, IdempotencyRecord.key == key
            )
        )
        if stored is not None:
            if stored.request_hash != request_hash:
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was already used with a different request.",
                    details=[{"field": HEADER, "message": "used with a different request"}],
                )
            body = _open(box, stored.response_body)
            return StoredResponse(stored.status_code, body, replayed=True), None
        record = IdempotencyRecord(
            workspace_id=workspace_id,
            key=key,
            request_hash=request_hash,
            status_code=status_code,
            response_body=b"",
            created_at=now,
            expires_at=now + ttl,
        )
        session.add(record)
        try:
            await session.flush()
        except IntegrityError as exc:
            raise _LostRace from exc
        value = await action(uow)
        body = msgspec.json.encode(value)
        record.response_body = _seal(box, body)
    return StoredResponse(status_code, body, replayed=False), value
