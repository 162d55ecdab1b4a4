"""Bookings against a booking resource API (the ``book_slot`` action).

How the deliverer calls it (one :class:`BookingClient` per provider account, key from the
workspace's secrets)::

    booking = await booking_client.book_first_available(
        resource_id=node.resource_id,
        attendee=Attendee(name=contact.name, email=contact.email),
        start=window_start, end=window_end,          # computed when the node ran
        idempotency_key=outbox_row.idempotency_key,
    )
    run_context[node_id] = {"booking_id": booking.id, "start": booking.start.isoformat()}

Redelivering the same effect returns the booking made the first time (found by its reference),
never a second one. :class:`NoSlotAvailable` and other
:class:`~app.integrations.http_guard.PermanentError` s fail the row;
:class:`~app.integrations.http_guard.TransientError` retries it later with the same key.
:meth:`BookingClient.list_slots` and :meth:`BookingClient.book` are there for a caller that lets a
person choose the slot.
"""

from app.integrations.booking.client import (
    Attendee,
    Booking,
    BookingClient,
    NoSlotAvailable,
    Slot,
    SlotUnavailable,
)

__all__ = ["Attendee", "Booking", "BookingClient", "NoSlotAvailable", "Slot", "SlotUnavailable"]
