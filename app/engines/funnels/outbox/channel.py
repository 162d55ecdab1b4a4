"""What a channel is handed and what it may answer: the leased effect (its payload decoded into
the channel's struct), the sender protocol every channel implements (``email`` in
``work/email.py``, the outside ones in ``funnels/outside/channels.py``) and the two errors that
decide between a retry and a final failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from app.engines.funnels.outbox import payloads
from app.engines.funnels.outbox.payloads import EffectPayload, Unreadable

P = TypeVar("P", bound=payloads.Payload)


class TransientDeliveryError(Exception):
    """Worth retrying later (4xx, timeouts, connection failures)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the provider asked us to wait, when it said so (the retry is not sooner)."""


class PermanentDeliveryError(Exception):
    """Retrying cannot help (refused address, invalid request)."""


@dataclass(frozen=True, slots=True)
class LeasedEffect:
    id: int
    workspace_id: int
    contact_id: int
    channel: str
    idempotency_key: str
    payload: EffectPayload | Unreadable
    """The row's payload decoded into its channel's struct, or why it does not decode."""
    attempts: int

    def payload_as(self, kind: type[P]) -> P:
        """The payload as the struct a channel is typed on (a mismatch cannot be delivered)."""
        if not isinstance(self.payload, kind):
            raise PermanentDeliveryError(
                f"the {self.channel} channel cannot deliver {type(self.payload).__name__}"
            )
        return self.payload


class ChannelSender(Protocol):
    async def send(self, effect: LeasedEffect) -> str:
        """Deliver one effect; returns a short detail for the delivery record (e.g. the
        provider's message id). Raises Transient/PermanentDeliveryError."""
        ...


class PreparedDelivery(Protocol):
    """A message made ready, not yet delivered (:class:`PreparingSender`)."""

    async def complete(self) -> str:
        """Deliver it; returns what :meth:`ChannelSender.send` returns, raises what it raises."""
        ...

    def abort(self) -> None:
        """Give it up, nothing delivered."""


@runtime_checkable
class PreparingSender(Protocol):
    """A channel that can do everything short of delivering ahead of time (SMTP: the whole
    transaction but its end of data), so the deliverer's wait for the previous outcome's commit
    overlaps it (:mod:`~app.engines.funnels.outbox.work.recorded_slots`)."""

    async def send(self, effect: LeasedEffect) -> str: ...

    async def prepare(self, effect: LeasedEffect) -> PreparedDelivery:
        """Raises Transient/PermanentDeliveryError, with nothing delivered."""
        ...
