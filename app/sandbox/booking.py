"""A loopback simulator of a booking resource API (the ``book_slot`` action).

A *resource* (a person's calendar, a room, a demo slot) has *slots*; booking one takes it.

- ``GET /v1/resources/{resource_id}/slots?start=…&end=…`` → ``{"slots": [{"id", "start", "end",
  "available"}]}`` (ISO 8601 times, slots starting inside the window, earliest first);
- ``POST /v1/resources/{resource_id}/bookings`` with ``{"slot_id", "attendee": {"name", "email",
  "phone"}, "reference", "notes"}`` → ``201 {"id", "status": "confirmed", "slot_id", "start",
  "end", "resource_id", "attendee", "reference"}``; a taken slot is ``409 slot_unavailable``, an
  unknown one ``404 slot_not_found``;
- ``GET /v1/bookings?reference=…`` → ``{"bookings": [...]}`` (the caller's own reference, so a
  caller can find what an earlier attempt booked);
- bearer API key, ``Idempotency-Key`` honoured as in :mod:`app.sandbox.payments`, errors
  ``{"error": {"code", "message", "field"}}``.

Fault kinds: ``slots.list``, ``bookings.create``, ``bookings.list``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.sandbox.base import (
    ThreadedServer,
    fault_response,
    restore_defaults,
    simulator_app,
    start_simulator,
)
from app.sandbox.payments import KeyReused, fingerprint
from app.sandbox.sms import JsonProviderSandbox, bearer_token, json_error


@dataclass
class BookingSandbox(JsonProviderSandbox):
    """Resources and their slots; :attr:`records` holds bookings by id."""

    api_keys: set[str] = field(default_factory=lambda: {"booking-sandbox-key"})
    slots: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """resource id → slot id → {"id", "start", "end", "booking_id"}."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bookings(self) -> dict[str, dict[str, Any]]:
        return self.records

    def add_slots(
        self, resource_id: str, first_start: datetime, count: int, minutes: int = 30
    ) -> list[str]:
        """Open ``count`` back-to-back slots of ``minutes`` from ``first_start``; their ids."""
        ids = []
        with self._lock:
            table = self.slots.setdefault(resource_id, {})
            for index in range(count):
                start = first_start + timedelta(minutes=minutes * index)
                slot_id = f"slot_{resource_id}_{int(start.timestamp())}"
                end = start + timedelta(minutes=minutes)
                table[slot_id] = {"id": slot_id, "start": start, "end": end, "booking_id": None}
                ids.append(slot_id)
        return ids

    def take_slot(self, resource_id: str, slot_id: str, booking_id: str) -> None:
        """Book a slot out of band (someone else got there first)."""
        with self._lock:
            self.slots[resource_id][slot_id]["booking_id"] = booking_id

    def reset_data(self) -> None:
        with self._lock:
            super().reset_data()
            restore_defaults(self, "slots")

    def create_app(self) -> Litestar:
        return create_booking_app(self)


def _public(slot: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": slot["id"],
        "start": slot["start"].isoformat(),
        "end": slot["end"].isoformat(),
        "available": slot["booking_id"] is None,
    }


def _parse_time(raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _attendee_error(attendee: Any) -> Response[Any] | None:
    if not isinstance(attendee, dict):
        return json_error(422, "invalid_request", "attendee is required", "attendee")
    for name in ("name", "email"):
        value = attendee.get(name)
        if not isinstance(value, str) or not value.strip():
            return json_error(
                422, "invalid_request", f"attendee.{name} is required", f"attendee.{name}"
            )
    if "@" not in attendee["email"]:
        return json_error(
            422, "invalid_request", "attendee.email is not an address", "attendee.email"
        )
    return None


def _authorised(sandbox: BookingSandbox, request: Request[Any, Any, Any]) -> str | None:
    key = bearer_token(request)
    return key if key in sandbox.api_keys else None


async def _list_slots(
    sandbox: BookingSandbox, request: Request[Any, Any, Any], resource_id: str
) -> Response[Any]:
    if (fault := sandbox.state.hit("slots.list")) is not None:
        return await fault_response(fault)
    if _authorised(sandbox, request) is None:
        return json_error(401, "unauthorized", "invalid API key")
    if resource_id not in sandbox.slots:
        return json_error(404, "resource_not_found", f"no resource {resource_id}")
    start = _parse_time(request.query_params.get("start"))
    end = _parse_time(request.query_params.get("end"))
    if start is None or end is None or end <= start:
        return json_error(
            422,
            "invalid_request",
            "start and end must be ISO 8601 times with an offset, start first",
            "start",
        )
    with sandbox._lock:
        found = sorted(
            (_public(s) for s in sandbox.slots[resource_id].values() if start <= s["start"] < end),
            key=lambda s: s["start"],
        )
    return Response({"slots": found}, media_type=MediaType.JSON)


async def _booking_request(request: Request[Any, Any, Any]) -> dict[str, Any] | Response[Any]:
    """The request body of a booking, or the error answering a body that is not one."""
    try:
        body = await request.json()
    except Exception:
        return json_error(400, "invalid_json", "the body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("slot_id"), str):
        return json_error(422, "invalid_request", "slot_id is required", "slot_id")
    if (error := _attendee_error(body.get("attendee"))) is not None:
        return error
    return body


def _take_for(
    sandbox: BookingSandbox, resource_id: str, body: dict[str, Any]
) -> dict[str, Any] | Response[Any]:
    """Book the requested slot: the new booking, or the error if the slot is unknown or taken."""
    with sandbox._lock:
        slot = sandbox.slots.get(resource_id, {}).get(body["slot_id"])
        if slot is None:
            return json_error(404, "slot_not_found", "no such slot", "slot_id")
        if slot["booking_id"] is not None:
            return json_error(409, "slot_unavailable", "the slot is already booked", "slot_id")
        booking_id = sandbox.next_id("bkg")
        slot["booking_id"] = booking_id
        booking = {
            "id": booking_id,
            "status": "confirmed",
            "resource_id": resource_id,
            "slot_id": slot["id"],
            "start": slot["start"].isoformat(),
            "end": slot["end"].isoformat(),
            "attendee": body["attendee"],
            "reference": body.get("reference"),
            "notes": body.get("notes"),
        }
        sandbox.records[booking_id] = booking
    return booking


async def _book(
    sandbox: BookingSandbox, request: Request[Any, Any, Any], resource_id: str
) -> Response[Any]:
    if (fault := sandbox.state.hit("bookings.create")) is not None:
        return await fault_response(fault)
    key = _authorised(sandbox, request)
    if key is None:
        return json_error(401, "unauthorized", "invalid API key")
    body = await _booking_request(request)
    if isinstance(body, Response):
        return body
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
    booking = _take_for(sandbox, resource_id, body)
    if isinstance(booking, Response):
        return booking
    sandbox.ledger.save(key, idem, fp, 201, booking)
    if (lost := await sandbox.lost.take()) is not None:
        return lost
    return Response(booking, status_code=201, media_type=MediaType.JSON)


async def _find(sandbox: BookingSandbox, request: Request[Any, Any, Any]) -> Response[Any]:
    if (fault := sandbox.state.hit("bookings.list")) is not None:
        return await fault_response(fault)
    if _authorised(sandbox, request) is None:
        return json_error(401, "unauthorized", "invalid API key")
    reference = request.query_params.get("reference")
    with sandbox._lock:
        found = [b for b in sandbox.records.values() if reference and b["reference"] == reference]
    return Response({"bookings": found}, media_type=MediaType.JSON)


def create_booking_app(sandbox: BookingSandbox) -> Litestar:
    """The routes, each answered by its handler above over ``sandbox``."""

    @get("/v1/resources/{resource_id:str}/slots")
    async def list_slots(
        request: Request[Any, Any, Any], resource_id: FromPath[str]
    ) -> Response[Any]:
        return await _list_slots(sandbox, request, resource_id)

    @post("/v1/resources/{resource_id:str}/bookings")
    async def book(request: Request[Any, Any, Any], resource_id: FromPath[str]) -> Response[Any]:
        return await _book(sandbox, request, resource_id)

    @get("/v1/bookings")
    async def find(request: Request[Any, Any, Any]) -> Response[Any]:
        return await _find(sandbox, request)

    return simulator_app([list_slots, book, find])


def start_booking_sandbox(sandbox: BookingSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or BookingSandbox())
