"""Loopback simulators of the two SMS provider shapes the ``send_sms`` action speaks.

**Generic JSON provider** (:class:`SmsSandbox`; its machinery, :class:`JsonProviderSandbox` and
:func:`accept_json`, also runs the push and letter simulators): ``POST /v1/messages`` with
``{"to", "from", "body"}``, ``Authorization: Bearer <api key>`` and ``Idempotency-Key``; answers
``201 {"id", "status": "queued", "to", "from", "body", "segments"}``; errors
``{"error": {"code", "message", "field"}}`` (401, 422, 429, 5xx). The idempotency key is honoured
the Stripe way (:class:`~app.sandbox.payments.IdempotencyLedger`): a retry replays the first answer
with ``Idempotent-Replayed: true``; the key with a different body is ``409 idempotency_key_reused``.

**Twilio** (:class:`TwilioSandbox`): ``POST /2010-04-01/Accounts/{AccountSid}/Messages.json``
form-encoded (``To``, ``From`` or ``MessagingServiceSid``, ``Body``, ``StatusCallback``), HTTP basic
auth with the account SID and auth token, the Message resource JSON in answer (``sid`` ``SM…``,
``status`` ``queued``, RFC 2822 dates), Twilio's error shape ``{"code", "message", "more_info",
"status"}``, and ``GET …/Messages.json`` (filters ``To``, ``From``, ``PageSize``; newest first) and
``GET …/Messages/{Sid}.json``. Like Twilio, it has no idempotency key: a repeated POST sends a second
message — which is why the Twilio client reconciles before resending.

Fault kinds: ``messages.create``, ``messages.list``, ``messages.get``. ``lost`` (a
:class:`~app.sandbox.payments.LostResponses`) fails replies after the message was accepted.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from typing import Any

from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.clock import Clock, SystemClock
from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    restore_defaults,
    simulator_app,
    start_simulator,
)
from app.sandbox.payments import IdempotencyLedger, KeyReused, LostResponses, fingerprint

E164 = re.compile(r"^\+[1-9]\d{6,14}$")
_GSM_SEGMENT = 160
_UNICODE_SEGMENT = 70


def segments(body: str) -> int:
    """SMS parts the body needs (160 GSM-7 characters, or 70 when it needs Unicode)."""
    per = _GSM_SEGMENT if body.isascii() else _UNICODE_SEGMENT
    return max(1, -(-len(body) // per))


def bearer_token(request: Request[Any, Any, Any]) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def json_error(status: int, code: str, message: str, field: str | None = None) -> Response[Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return Response({"error": error}, status_code=status, media_type=MediaType.JSON)


@dataclass
class JsonProviderSandbox(HttpSimulator):
    """What every generic JSON provider simulator holds (SMS here; push and letter reuse it):
    API keys, the accepted records by id, the idempotency ledger and armed lost replies.
    :meth:`reset` keeps the keys and forgets the rest (ids start at 1 again)."""

    state: SandboxState = field(default_factory=SandboxState)
    api_keys: set[str] = field(default_factory=lambda: {"sandbox-key"})
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    ledger: IdempotencyLedger = field(default_factory=IdempotencyLedger)
    lost: LostResponses = field(default_factory=LostResponses)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):08d}"

    def reset_data(self) -> None:
        restore_defaults(self, "records", "ledger", "lost", "_ids")


Validator = Callable[[dict[str, Any]], Response[Any] | None]
"""Returns the error response for an invalid request body, or ``None``."""
Builder = Callable[[str, dict[str, Any]], dict[str, Any]]
"""Builds the accepted record from its new id and the request body."""


async def accept_json(
    sandbox: JsonProviderSandbox,
    request: Request[Any, Any, Any],
    *,
    kind: str,
    prefix: str,
    validate: Validator,
    build: Builder,
) -> Response[Any]:
    """The common life of a generic provider's create call: fault, auth, parse, validate,
    idempotent replay, effect, possibly a lost reply."""
    if (fault := sandbox.state.hit(kind)) is not None:
        return await fault_response(fault)
    key = bearer_token(request)
    if key not in sandbox.api_keys:
        return json_error(401, "unauthorized", "invalid API key")
    try:
        body = await request.json()
    except Exception:
        return json_error(400, "invalid_json", "the body is not JSON")
    if not isinstance(body, dict):
        return json_error(422, "invalid_request", "expected an object")
    if (invalid := validate(body)) is not None:
        return invalid
    idem = request.headers.get("idempotency-key")
    fp = fingerprint("POST", request.url.path, body)
    try:
        saved = sandbox.ledger.replay(key, idem, fp)
    except KeyReused:
        return json_error(409, "idempotency_key_reused", "the key was used for a different request")
    if saved is not None:
        return Response(
            saved[1],
            status_code=saved[0],
            media_type=MediaType.JSON,
            headers={"Idempotent-Replayed": "true"},
        )
    record_id = sandbox.next_id(prefix)
    record = build(record_id, body)
    sandbox.records[record_id] = record
    sandbox.ledger.save(key, idem, fp, 201, record)
    if (lost := await sandbox.lost.take()) is not None:
        return lost
    return Response(record, status_code=201, media_type=MediaType.JSON)


@dataclass
class SmsSandbox(JsonProviderSandbox):
    """The generic JSON SMS provider."""

    api_keys: set[str] = field(default_factory=lambda: {"sms-sandbox-key"})

    @property
    def messages(self) -> dict[str, dict[str, Any]]:
        return self.records

    def create_app(self) -> Litestar:
        return create_sms_app(self)


def _validate_sms(body: dict[str, Any]) -> Response[Any] | None:
    to, text, sender = body.get("to"), body.get("body"), body.get("from")
    if not isinstance(to, str) or not E164.match(to):
        return json_error(422, "invalid_number", "to must be an E.164 number", "to")
    if not isinstance(text, str) or not text.strip():
        return json_error(422, "invalid_request", "body must not be empty", "body")
    if sender is not None and not isinstance(sender, str):
        return json_error(422, "invalid_request", "from must be a string", "from")
    return None


def _build_sms(message_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": message_id,
        "status": "queued",
        "to": body["to"],
        "from": body.get("from"),
        "body": body["body"],
        "segments": segments(body["body"]),
    }


def create_sms_app(sandbox: SmsSandbox) -> Litestar:
    @post("/v1/messages")
    async def send(request: Request[Any, Any, Any]) -> Response[Any]:
        return await accept_json(
            sandbox,
            request,
            kind="messages.create",
            prefix="sms",
            validate=_validate_sms,
            build=_build_sms,
        )

    return simulator_app([send])


def start_sms_sandbox(sandbox: SmsSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or SmsSandbox())


# --- Twilio -----------------------------------------------------------------------------------


@dataclass
class TwilioSandbox(HttpSimulator):
    """Twilio accounts (SID → auth token) and the messages created in them, oldest first.
    :meth:`reset` keeps the accounts and forgets the messages and armed lost replies."""

    state: SandboxState = field(default_factory=SandboxState)
    accounts: dict[str, str] = field(
        default_factory=lambda: {"AC" + "0" * 32: "sandbox-twilio-token"}
    )
    clock: Clock = field(default_factory=SystemClock)
    messages: list[dict[str, Any]] = field(default_factory=list)
    lost: LostResponses = field(default_factory=LostResponses)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sent_to(self, to: str) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.messages if m["to"] == to]

    def reset_data(self) -> None:
        with self._lock:
            restore_defaults(self, "messages", "lost")

    def create_app(self) -> Litestar:
        return create_twilio_app(self)


def twilio_error(status: int, code: int, message: str) -> Response[Any]:
    return Response(
        {
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
        status_code=status,
        media_type=MediaType.JSON,
    )


def _twilio_account(
    sandbox: TwilioSandbox, request: Request[Any, Any, Any], account_sid: str
) -> bool:
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, _, password = base64.b64decode(encoded).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return user == account_sid and sandbox.accounts.get(user) == password


def _rfc2822(when: datetime) -> str:
    return format_datetime(when, usegmt=False).replace("-0000", "+0000")


def _message_resource(
    account_sid: str,
    sid: str,
    to: str,
    sender: str | None,
    service: str | None,
    body: str,
    now: datetime,
) -> dict[str, Any]:
    uri = f"/2010-04-01/Accounts/{account_sid}/Messages/{sid}.json"
    return {
        "account_sid": account_sid,
        "api_version": "2010-04-01",
        "body": body,
        "date_created": _rfc2822(now),
        "date_updated": _rfc2822(now),
        "date_sent": None,
        "direction": "outbound-api",
        "error_code": None,
        "error_message": None,
        "from": sender,
        "messaging_service_sid": service,
        "num_media": "0",
        "num_segments": str(segments(body)),
        "price": None,
        "price_unit": "USD",
        "sid": sid,
        "status": "accepted" if service and not sender else "queued",
        "subresource_uris": {"media": uri.replace(".json", "/Media.json")},
        "to": to,
        "uri": uri,
    }


def _invalid_message(to: Any, sender: Any, service: Any, body: Any) -> Response[Any] | None:
    """Twilio's answer to a message it would not send, checked in Twilio's order; ``None`` if
    the message is acceptable."""
    if not to:
        return twilio_error(400, 21604, "A 'To' phone number is required.")
    if not E164.match(str(to)):
        return twilio_error(400, 21211, f"The 'To' number {to} is not a valid phone number.")
    if not sender and not service:
        return twilio_error(
            400, 21603, "A 'From' phone number or a MessagingServiceSid is required."
        )
    if not body:
        return twilio_error(400, 21602, "Message body is required.")
    if len(str(body)) > 1600:
        return twilio_error(400, 21617, "The concatenated message body exceeds 1600 characters.")
    return None


async def _create_message(
    sandbox: TwilioSandbox, request: Request[Any, Any, Any], account_sid: str
) -> Response[Any]:
    if (fault := sandbox.state.hit("messages.create")) is not None:
        return await fault_response(fault)
    if not _twilio_account(sandbox, request, account_sid):
        return twilio_error(401, 20003, "Authenticate")
    form = await request.form()
    to, body = form.get("To"), form.get("Body")
    sender, service = form.get("From"), form.get("MessagingServiceSid")
    if (invalid := _invalid_message(to, sender, service, body)) is not None:
        return invalid
    with sandbox._lock:
        seq = len(sandbox.messages) + 1
        sid = "SM" + hashlib.md5(f"{account_sid}:{seq}".encode(), usedforsecurity=False).hexdigest()
        message = _message_resource(
            account_sid,
            sid,
            str(to),
            sender and str(sender),
            service and str(service),
            str(body),
            sandbox.clock.now(),
        )
        sandbox.messages.append(message)
    if (lost := await sandbox.lost.take()) is not None:
        return lost
    return Response(message, status_code=201, media_type=MediaType.JSON)


async def _list_messages(
    sandbox: TwilioSandbox, request: Request[Any, Any, Any], account_sid: str
) -> Response[Any]:
    if (fault := sandbox.state.hit("messages.list")) is not None:
        return await fault_response(fault)
    if not _twilio_account(sandbox, request, account_sid):
        return twilio_error(401, 20003, "Authenticate")
    query = request.query_params
    page_size = min(1000, int(query.get("PageSize", "50") or 50))
    with sandbox._lock:
        found = [
            m
            for m in reversed(sandbox.messages)
            if m["account_sid"] == account_sid
            and ("To" not in query or m["to"] == query["To"])
            and ("From" not in query or m["from"] == query["From"])
        ][:page_size]
    uri = f"/2010-04-01/Accounts/{account_sid}/Messages.json?PageSize={page_size}&Page=0"
    return Response(
        {
            "messages": found,
            "end": max(0, len(found) - 1),
            "first_page_uri": uri,
            "next_page_uri": None,
            "page": 0,
            "page_size": page_size,
            "previous_page_uri": None,
            "start": 0,
            "uri": uri,
        },
        media_type=MediaType.JSON,
    )


async def _fetch_message(
    sandbox: TwilioSandbox, request: Request[Any, Any, Any], account_sid: str, message_sid: str
) -> Response[Any]:
    if (fault := sandbox.state.hit("messages.get")) is not None:
        return await fault_response(fault)
    if not _twilio_account(sandbox, request, account_sid):
        return twilio_error(401, 20003, "Authenticate")
    sid = message_sid.removesuffix(".json")
    with sandbox._lock:
        found = next((m for m in sandbox.messages if m["sid"] == sid), None)
    if found is None or found["account_sid"] != account_sid:
        return twilio_error(404, 20404, f"The requested resource {request.url.path} was not found")
    return Response(found, media_type=MediaType.JSON)


def create_twilio_app(sandbox: TwilioSandbox) -> Litestar:
    """The Messages resource of an account, each route answered by its handler above."""
    base = "/2010-04-01/Accounts/{account_sid:str}"

    @post(f"{base}/Messages.json")
    async def create(request: Request[Any, Any, Any], account_sid: FromPath[str]) -> Response[Any]:
        return await _create_message(sandbox, request, account_sid)

    @get(f"{base}/Messages.json")
    async def list_messages(
        request: Request[Any, Any, Any], account_sid: FromPath[str]
    ) -> Response[Any]:
        return await _list_messages(sandbox, request, account_sid)

    @get(f"{base}/Messages/{{message_sid:str}}")
    async def fetch(
        request: Request[Any, Any, Any], account_sid: FromPath[str], message_sid: FromPath[str]
    ) -> Response[Any]:
        return await _fetch_message(sandbox, request, account_sid, message_sid)

    return simulator_app([create, list_messages, fetch])


def start_twilio_sandbox(sandbox: TwilioSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or TwilioSandbox())
