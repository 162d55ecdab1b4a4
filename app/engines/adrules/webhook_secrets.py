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
    if action.format != "signed_json":
        return _seal_chat_url(task, action, box, previous=previous, field=field)
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


def masked_url(url: str) -> str:
    """A Slack or Teams webhook URL as it may be shown: its host and its last characters. The
    whole URL is the credential (whoever has it posts to the channel)."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return f"{scheme}://{host}/…{path[-6:]}" if path else url


def _seal_chat_url(
    task: TaskIn,
    action: NotifyWebhook,
    box: SecretBox,
    *,
    previous: dict[str, Any] | None,
    field: str,
) -> TaskIn:
    """Slack and Teams sign nothing: their URL is the secret. It is stored encrypted (in
    ``sealed_secret``) and shown masked; the masked URL sent back unchanged keeps the stored one."""
    if action.secret is not None:
        raise ValidationFailed.field(
            f"{field}.action.secret", f"a {action.format} webhook takes no signing secret"
        )
    before = (previous or {}).get("action") or {}
    if (
        "…" in action.url
        and before.get("url") == action.url
        and before.get("format") == action.format
        and isinstance(before.get("sealed_secret"), str)
    ):
        sealed = before["sealed_secret"]
    elif "…" in action.url:
        raise ValidationFailed.field(
            f"{field}.action.url", "give the whole webhook URL (a masked one is only shown)"
        )
    else:
        sealed = box.encrypt(action.url).decode()
    stored = NotifyWebhook(
        url=masked_url(action.url) if "…" not in action.url else action.url,
        format=action.format,
        has_secret=True,
        sealed_secret=sealed,
    )
    return msgspec.structs.replace(task, action=stored)


def chat_url(action: NotifyWebhook, box: SecretBox) -> str:
    """Where a Slack or Teams digest is posted: the stored (encrypted) URL."""
    if action.sealed_secret is None:
        return action.url
    return box.decrypt(action.sealed_secret.encode())


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
    return NotifyWebhook(url=action.url, format=action.format, has_secret=stored)


def public_task(task: TaskDocument) -> TaskDocument:
    return msgspec.structs.replace(task, action=public_action(task.action))


def open_secret(action: NotifyWebhook, box: SecretBox) -> str | None:
    """The signing secret of a stored webhook action (None when none is stored)."""
    if action.sealed_secret is None:
        return None
    return box.decrypt(action.sealed_secret.encode())
