"""The ``notify_webhook`` signing secret is write-only (spec AR-24, PL-3).

A secret given with a task is encrypted with the server's secret box before the task is stored; the
stored document, the job payload and the records hold only that ciphertext (``sealed_secret``), and
the worker opens it at the moment it signs. Everything answered to people or API clients goes
through :func:`public_task`, which drops the ciphertext and says ``has_secret`` instead. A task
updated without a secret keeps the one it had.
"""

from __future__ import annotations

from typing import Any

import msgspec

from app.engines.adrules.schemas import Action, NotifyWebhook, TaskDocument, TaskIn
from app.errors import ValidationFailed
from app.platform.crypto import SecretBox


def seal_task(
    task: TaskIn, box: SecretBox, *, previous: dict[str, Any] | None, field: str
) -> TaskIn:
    """``task`` ready to store: a webhook secret encrypted (or the previous document's kept).

    ``previous`` is the stored document of the task being updated (None for a new task); ``field``
    is where the task sits in the request (``tasks[0]``, ``task``), for error messages."""
    action = task.action
    if not isinstance(action, NotifyWebhook):
        return task
    if action.sealed_secret is not None:
        raise ValidationFailed.field(
            f"{field}.action.sealed_secret", "is set by the server; send secret instead"
        )
    if action.secret is not None:
        sealed = box.encrypt(action.secret).decode()
    else:
        kept = _previous_sealed(previous)
        if kept is None:
            raise ValidationFailed.field(
                f"{field}.action.secret", "a webhook needs a signing secret", code="required"
            )
        sealed = kept
    sealed_action = NotifyWebhook(url=action.url, has_secret=True, sealed_secret=sealed)
    return msgspec.structs.replace(task, action=sealed_action)


def _previous_sealed(previous: dict[str, Any] | None) -> str | None:
    if previous is None:
        return None
    action = previous.get("action") or {}
    if action.get("type") != "notify_webhook":
        return None
    sealed = action.get("sealed_secret")
    return sealed if isinstance(sealed, str) else None


def public_action(action: Action) -> Action:
    """``action`` as it may be shown: never the secret nor its ciphertext."""
    if not isinstance(action, NotifyWebhook):
        return action
    stored = action.has_secret or action.sealed_secret is not None or action.secret is not None
    return NotifyWebhook(url=action.url, has_secret=stored)


def public_task(task: TaskDocument) -> TaskDocument:
    return msgspec.structs.replace(task, action=public_action(task.action))


def open_secret(action: NotifyWebhook, box: SecretBox) -> str | None:
    """The signing secret of a stored webhook action (None when none is stored)."""
    if action.sealed_secret is None:
        return None
    return box.decrypt(action.sealed_secret.encode())
