"""A loopback simulator of a generic JSON push-notification provider (the ``send_push`` action).

``POST /v1/notifications`` with ``{"to": device token, "title", "body", "data": {str: str},
"url"}``, a bearer API key and ``Idempotency-Key``; answers ``201 {"id", "status": "accepted", …}``.
A device token listed in :attr:`PushSandbox.unregistered_tokens` answers ``410 {"error": {"code":
"unregistered"}}`` like FCM's UNREGISTERED and APNs's 410: the app was removed, the token is dead.
Conventions, idempotency and faults (kind ``notifications.create``) as in :mod:`app.sandbox.sms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar, Request, Response, post

from app.sandbox.base import ThreadedServer, simulator_app, start_simulator
from app.sandbox.sms import JsonProviderSandbox, Validator, accept_json, json_error

MAX_PAYLOAD_BYTES = 4096
"""APNs and FCM both cap a notification's payload at 4 KB."""


@dataclass
class PushSandbox(JsonProviderSandbox):
    api_keys: set[str] = field(default_factory=lambda: {"push-sandbox-key"})
    unregistered_tokens: set[str] = field(default_factory=set)
    """Dead device tokens: those it was built with, and those a test adds (:meth:`reset` keeps
    only the first)."""
    _built_unregistered: frozenset[str] = field(init=False, repr=False, default=frozenset())

    def __post_init__(self) -> None:
        self._built_unregistered = frozenset(self.unregistered_tokens)

    @property
    def notifications(self) -> dict[str, dict[str, Any]]:
        return self.records

    def reset_data(self) -> None:
        super().reset_data()
        self.unregistered_tokens = set(self._built_unregistered)

    def create_app(self) -> Litestar:
        return create_push_app(self)


def _validator(sandbox: PushSandbox) -> Validator:
    def validate(body: dict[str, Any]) -> Response[Any] | None:
        token, title, text = body.get("to"), body.get("title"), body.get("body")
        if not isinstance(token, str) or not token:
            return json_error(422, "invalid_request", "to must be a device token", "to")
        if not isinstance(title, str) or not title.strip():
            return json_error(422, "invalid_request", "title must not be empty", "title")
        if not isinstance(text, str):
            return json_error(422, "invalid_request", "body must be a string", "body")
        data = body.get("data", {})
        if not isinstance(data, dict) or any(not isinstance(v, str) for v in data.values()):
            return json_error(422, "invalid_request", "data values must be strings", "data")
        if len(title.encode()) + len(text.encode()) + len(str(data).encode()) > MAX_PAYLOAD_BYTES:
            return json_error(413, "payload_too_large", "the notification exceeds 4 KB")
        if token in sandbox.unregistered_tokens:
            return json_error(410, "unregistered", "the device token is no longer registered", "to")
        return None

    return validate


def _build(notification_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": notification_id,
        "status": "accepted",
        "to": body["to"],
        "title": body["title"],
        "body": body["body"],
        "data": body.get("data", {}),
        "url": body.get("url"),
    }


def create_push_app(sandbox: PushSandbox) -> Litestar:
    validate = _validator(sandbox)

    @post("/v1/notifications")
    async def send(request: Request[Any, Any, Any]) -> Response[Any]:
        return await accept_json(
            sandbox,
            request,
            kind="notifications.create",
            prefix="ntf",
            validate=validate,
            build=_build,
        )

    return simulator_app([send])


def start_push_sandbox(sandbox: PushSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or PushSandbox())
