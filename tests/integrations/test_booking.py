"""The booking client against its simulator (``book_slot``; FN-7: one effect, one booking)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from app.integrations.booking import (
    Attendee,
    BookingClient,
    NoSlotAvailable,
    SlotUnavailable,
)
from app.integrations.http_guard import InvalidResponse, PermanentError, RetryPolicy, TransientError
from app.sandbox.booking import BookingSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    Served,
    provider_setup,
    quick_retries,
    served_fixture,
)
from tests.harness.sleep import RecordingSleep

API_KEY = "booking-key-of-workspace-2-abcdef"
MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ADA = Attendee(name="Ada Lovelace", email="ada@example.com")


@dataclass
class Setup(ProviderSetup[BookingSandbox, BookingClient]):
    slots: list[str]


def fresh_sandbox() -> BookingSandbox:
    return BookingSandbox(api_keys={API_KEY})


def new_client(url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT) -> BookingClient:
    return BookingClient(
        base_url=url,
        api_key=API_KEY,
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served = served_fixture(fresh_sandbox)


@pytest.fixture
async def booking(served: Served[BookingSandbox]) -> AsyncIterator[Setup]:
    async with provider_setup(served, new_client) as setup:
        slots = setup.sandbox.add_slots("demo-room", MONDAY, count=4, minutes=30)
        yield Setup(**vars(setup), slots=slots)


async def book_first(setup: Setup, key: str, client: BookingClient | None = None):
    return await (client or setup.client).book_first_available(
        "demo-room", ADA, start=MONDAY, end=MONDAY + timedelta(hours=2), idempotency_key=key
    )


async def test_lists_the_slots_of_a_window(booking: Setup) -> None:
    booking.sandbox.take_slot("demo-room", booking.slots[1], "bkg_other")
    slots = await booking.client.list_slots(
        "demo-room", start=MONDAY + timedelta(minutes=30), end=MONDAY + timedelta(hours=2)
    )
    assert [s.id for s in slots] == booking.slots[1:]
    assert [s.available for s in slots] == [False, True, True]
    assert slots[0].start == MONDAY + timedelta(minutes=30)


async def test_books_the_first_free_slot(booking: Setup) -> None:
    booking.sandbox.take_slot("demo-room", booking.slots[0], "bkg_other")
    made = await book_first(booking, "fx-1")
    assert made.status == "confirmed"
    assert made.slot_id == booking.slots[1]
    assert made.start == MONDAY + timedelta(minutes=30)
    assert made.reference == "fx-1"


async def test_a_redelivered_effect_returns_the_same_booking(booking: Setup) -> None:
    """FN-7: the second delivery finds the first booking by its reference."""
    first = await book_first(booking, "fx-2")
    again = await book_first(booking, "fx-2")
    assert again == first
    assert len(booking.sandbox.bookings) == 1


async def test_a_lost_reply_is_replayed_within_the_call(booking: Setup) -> None:
    booking.sandbox.lost.arm(times=1, status=502)
    made = await book_first(booking, "fx-3")
    assert list(booking.sandbox.bookings) == [made.id]
    assert booking.sandbox.state.count("bookings.create") == 2


async def test_a_delivery_that_gave_up_is_not_booked_twice_on_redelivery(booking: Setup) -> None:
    """The first delivery booked slot 1 but never heard back; slot 1 is now taken, so a naive
    retry would book slot 2. The redelivery finds the booking instead."""
    impatient = BookingClient(
        base_url=booking.url, api_key=API_KEY, timeout=1.0, policy=RetryPolicy(attempts=1)
    )
    booking.sandbox.lost.arm(times=1, status=201, delay_seconds=3.0)
    try:
        with pytest.raises(TransientError):
            await book_first(booking, "fx-4", impatient)
    finally:
        await impatient.aclose()
    again = await book_first(booking, "fx-4")
    assert again.slot_id == booking.slots[0]
    assert len(booking.sandbox.bookings) == 1


async def test_concurrent_effects_never_share_a_slot(booking: Setup) -> None:
    results = await asyncio.gather(
        *(book_first(booking, f"fx-c{i}") for i in range(6)), return_exceptions=True
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(made) == 4
    assert {b.slot_id for b in made} == set(booking.slots)
    assert all(isinstance(r, NoSlotAvailable) for r in refused)
    assert len(booking.sandbox.bookings) == 4


async def test_a_taken_slot_is_unavailable(booking: Setup) -> None:
    booking.sandbox.take_slot("demo-room", booking.slots[2], "bkg_other")
    with pytest.raises(SlotUnavailable):
        await booking.client.book("demo-room", booking.slots[2], ADA, idempotency_key="fx-5")
    assert booking.sandbox.state.count("bookings.create") == 1


async def test_a_full_window_is_no_slot_available(booking: Setup) -> None:
    for slot in booking.slots:
        booking.sandbox.take_slot("demo-room", slot, "bkg_other")
    with pytest.raises(NoSlotAvailable):
        await book_first(booking, "fx-6")


async def test_transient_errors_are_retried(booking: Setup) -> None:
    booking.sandbox.state.inject("slots.list", status=503)
    booking.sandbox.state.inject("bookings.create", status=429, headers={"Retry-After": "1"})
    await book_first(booking, "fx-7")
    assert booking.sandbox.state.count("slots.list") == 2
    assert booking.sandbox.state.count("bookings.create") == 2
    assert 1.0 in booking.sleeps.waits
    assert len(booking.sandbox.bookings) == 1


async def test_an_invalid_attendee_is_permanent(booking: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await booking.client.book(
            "demo-room",
            booking.slots[0],
            Attendee(name="Ada", email="not-an-address"),
            idempotency_key="fx-8",
        )
    assert info.value.status == 422
    assert booking.sandbox.state.count("bookings.create") == 1
    assert booking.sleeps.waits == []


async def test_garbage_and_silence_are_clear_errors(booking: Setup) -> None:
    booking.sandbox.state.inject("slots.list", status=200, body={"slots": [{"id": 1}]})
    with pytest.raises(InvalidResponse):
        await booking.client.list_slots("demo-room", start=MONDAY, end=MONDAY + timedelta(hours=1))
    booking.sandbox.state.inject("slots.list", status=200, delay_seconds=3.0, times=-1)
    silent = new_client(booking.url, booking.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError):
            await silent.list_slots("demo-room", start=MONDAY, end=MONDAY + timedelta(hours=1))
    finally:
        await silent.aclose()
