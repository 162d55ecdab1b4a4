"""The channels a rule sends its run digest to: one per distinct notify action of its tasks.

Two tasks naming the same address share one channel (one message per run, not one per task);
the key is a hash of the kind and address, so a stored digest row never holds a Slack or Teams
URL (those URLs are credentials)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from app.engines.adrules.schemas import NotifyEmail, NotifyWebhook, RuleDocument


@dataclass(frozen=True, slots=True)
class Channel:
    key: str
    kind: str
    """``email``, ``signed_json``, ``slack`` or ``teams``."""
    action: NotifyEmail | NotifyWebhook
    task_ids: tuple[int, ...]
    """The tasks whose action names this channel."""


def channel_key(action: NotifyEmail | NotifyWebhook) -> str:
    if isinstance(action, NotifyEmail):
        address = "email:" + ",".join(sorted(r.lower() for r in action.recipients))
    else:
        address = f"{action.format}:{action.url}"
    return hashlib.sha256(address.encode()).hexdigest()[:32]


def channel_kind(action: NotifyEmail | NotifyWebhook) -> str:
    return "email" if isinstance(action, NotifyEmail) else action.format


def channel_label(action: NotifyEmail | NotifyWebhook) -> str:
    """How a record names the channel it went into (no URL: a Slack or Teams URL is a secret)."""
    if isinstance(action, NotifyEmail):
        return "e-mail to " + ", ".join(action.recipients)
    return {"signed_json": "signed webhook", "slack": "Slack", "teams": "Microsoft Teams"}[
        action.format
    ]


def rule_channels(rule: RuleDocument) -> list[Channel]:
    """The rule's channels in task order, each address once."""
    found: dict[str, tuple[NotifyEmail | NotifyWebhook, list[int]]] = {}
    for task in rule.tasks:
        action = task.action
        if isinstance(action, NotifyEmail | NotifyWebhook):
            key = channel_key(action)
            found.setdefault(key, (action, []))[1].append(task.id)
    return [
        Channel(key, channel_kind(action), action, tuple(task_ids))
        for key, (action, task_ids) in found.items()
    ]
