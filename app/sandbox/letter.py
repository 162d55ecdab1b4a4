"""A loopback simulator of a generic JSON print-and-mail provider (the ``send_letter`` action).

``POST /v1/letters`` with ``{"to": address, "from": address, "content": HTML, "color": bool,
"description"}`` where an address is ``{"name", "line1", "line2", "city", "state", "postal_code",
"country"}`` (ISO 3166 alpha-2), a bearer API key and ``Idempotency-Key``; answers
``201 {"id", "status": "accepted", "expected_delivery_date", "pages", …}``. Conventions,
idempotency and faults (kind ``letters.create``) as in :mod:`app.sandbox.sms`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from litestar import Litestar, Request, Response, post

from app.clock import Clock, SystemClock
from app.sandbox.base import ThreadedServer, simulator_app, start_simulator
from app.sandbox.sms import JsonProviderSandbox, accept_json, json_error

_COUNTRY = re.compile(r"^[A-Z]{2}$")
_REQUIRED = ("name", "line1", "city", "postal_code", "country")
_CHARS_PER_PAGE = 3000
DELIVERY_DAYS = 4


@dataclass
class LetterSandbox(JsonProviderSandbox):
    api_keys: set[str] = field(default_factory=lambda: {"letter-sandbox-key"})
    clock: Clock = field(default_factory=SystemClock)

    @property
    def letters(self) -> dict[str, dict[str, Any]]:
        return self.records

    def create_app(self) -> Litestar:
        return create_letter_app(self)


def _address_error(value: Any, where: str) -> Response[Any] | None:
    if not isinstance(value, dict):
        return json_error(422, "invalid_address", f"{where} must be an address", where)
    for name in _REQUIRED:
        if not isinstance(value.get(name), str) or not value[name].strip():
            return json_error(
                422, "invalid_address", f"{where}.{name} is required", f"{where}.{name}"
            )
    if not _COUNTRY.match(value["country"]):
        return json_error(
            422, "invalid_address", f"{where}.country must be ISO 3166 alpha-2", f"{where}.country"
        )
    return None


def _validate(body: dict[str, Any]) -> Response[Any] | None:
    if (error := _address_error(body.get("to"), "to")) is not None:
        return error
    if body.get("from") is not None and (error := _address_error(body["from"], "from")):
        return error
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        return json_error(422, "invalid_request", "content must not be empty", "content")
    if not isinstance(body.get("color", False), bool):
        return json_error(422, "invalid_request", "color must be a boolean", "color")
    return None


def create_letter_app(sandbox: LetterSandbox) -> Litestar:
    def build(letter_id: str, body: dict[str, Any]) -> dict[str, Any]:
        today = sandbox.clock.now().date()
        return {
            "id": letter_id,
            "status": "accepted",
            "to": body["to"],
            "from": body.get("from"),
            "color": body.get("color", False),
            "description": body.get("description"),
            "pages": max(1, -(-len(body["content"]) // _CHARS_PER_PAGE)),
            "expected_delivery_date": (today + timedelta(days=DELIVERY_DAYS)).isoformat(),
        }

    @post("/v1/letters")
    async def send(request: Request[Any, Any, Any]) -> Response[Any]:
        return await accept_json(
            sandbox, request, kind="letters.create", prefix="ltr", validate=_validate, build=build
        )

    return simulator_app([send])


def start_letter_sandbox(sandbox: LetterSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or LetterSandbox())
