"""Client of a booking resource API: list a resource's slots, book one, find a booking again.

Booking is the one effect whose target is chosen at delivery time (the first free slot), so two
mechanisms make it happen once. Each booking request carries ``Idempotency-Key`` — the effect's
key plus the slot — so an in-flight retry of the same request is replayed; and each booking carries
the effect's key as its ``reference``, so before choosing a slot the client asks whether an earlier
delivery already booked one (it may have booked a slot that is, for that reason, no longer free).
"""

from __future__ import annotations

from datetime import datetime

import httpx
import msgspec

from app.clock import Clock
from app.integrations.http_guard import (
    AddressGuard,
    PermanentError,
    ProviderHttp,
    RetryPolicy,
    decode,
)
from app.integrations.http_guard.user_agent import USER_AGENT

PROVIDER = "booking"


class Slot(msgspec.Struct, frozen=True):
    id: str
    start: datetime
    end: datetime
    available: bool = True


class Attendee(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    email: str
    phone: str | None = None


class Booking(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    status: str
    slot_id: str
    start: datetime
    end: datetime
    reference: str | None = None


class SlotUnavailable(PermanentError):
    """Someone else booked the slot first."""


class NoSlotAvailable(PermanentError):
    """Nothing free in the requested window."""


class _Slots(msgspec.Struct, frozen=True):
    slots: list[Slot]


class _Bookings(msgspec.Struct, frozen=True):
    bookings: list[Booking]


class BookingClient:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = ProviderHttp(
            provider=PROVIDER,
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            user_agent=user_agent,
            policy=policy,
            clock=clock,
            guard=guard,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def list_slots(self, resource_id: str, *, start: datetime, end: datetime) -> list[Slot]:
        """Slots starting in ``[start, end)``, earliest first (GET, safe to retry)."""
        response = await self._http.send(
            "GET",
            f"/v1/resources/{resource_id}/slots",
            params={"start": start.isoformat(), "end": end.isoformat()},
        )
        return sorted(decode(response, _Slots, provider=PROVIDER).slots, key=lambda s: s.start)

    async def find_booking(self, reference: str) -> Booking | None:
        response = await self._http.send("GET", "/v1/bookings", params={"reference": reference})
        found = decode(response, _Bookings, provider=PROVIDER).bookings
        return found[0] if found else None

    async def book(
        self,
        resource_id: str,
        slot_id: str,
        attendee: Attendee,
        *,
        idempotency_key: str,
        reference: str | None = None,
        notes: str | None = None,
    ) -> Booking:
        """Book one slot; :class:`SlotUnavailable` when it is taken."""
        payload = {
            "slot_id": slot_id,
            "attendee": msgspec.to_builtins(attendee),
            "reference": reference,
            "notes": notes,
        }
        try:
            response = await self._http.send(
                "POST",
                f"/v1/resources/{resource_id}/bookings",
                json=payload,
                idempotency_key=idempotency_key,
            )
        except PermanentError as exc:
            if exc.code == "slot_unavailable":
                raise SlotUnavailable(
                    exc.message, provider=PROVIDER, status=exc.status, code=exc.code
                ) from exc
            raise
        return decode(response, Booking, provider=PROVIDER)

    async def book_first_available(
        self,
        resource_id: str,
        attendee: Attendee,
        *,
        start: datetime,
        end: datetime,
        idempotency_key: str,
        notes: str | None = None,
    ) -> Booking:
        """The ``book_slot`` effect: the booking an earlier delivery made, or the first free slot
        in ``[start, end)``; :class:`NoSlotAvailable` when there is none."""
        earlier = await self.find_booking(idempotency_key)
        if earlier is not None:
            return earlier
        for slot in await self.list_slots(resource_id, start=start, end=end):
            if not slot.available:
                continue
            try:
                return await self.book(
                    resource_id,
                    slot.id,
                    attendee,
                    idempotency_key=f"{idempotency_key}:{slot.id}",
                    reference=idempotency_key,
                    notes=notes,
                )
            except SlotUnavailable:
                continue  # taken since we listed it; the next one may still be free
        raise NoSlotAvailable(
            f"no free slot of {resource_id} between {start.isoformat()} and {end.isoformat()}",
            provider=PROVIDER,
            code="no_slot_available",
        )
