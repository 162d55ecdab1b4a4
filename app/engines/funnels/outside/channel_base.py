"""The shared life of an outside channel (see :mod:`.channels` for the channels themselves).

A result already recorded for this effect (an earlier delivery finished but died before the
outbox row was marked) is returned without calling out; the workspace's provider is loaded at send
time; the call carries the effect's idempotency key;
:class:`~app.integrations.http_guard.TransientError` becomes a deferred retry that honours the
provider's ``Retry-After``, :class:`~app.integrations.http_guard.PermanentError` (or
:class:`Refused`) a recorded failure. What came back is recorded (:mod:`.results`) and the run
waiting on it, if any, is woken.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from app.engines.funnels.models import Contact
from app.engines.funnels.outbox.channel import (
    LeasedEffect,
    PermanentDeliveryError,
    TransientDeliveryError,
)
from app.engines.funnels.outbox.payloads import Payload, Request
from app.engines.funnels.outbox.work.channel_deps import ChannelDeps
from app.engines.funnels.outside import config as provider_config
from app.engines.funnels.outside.config import Provider
from app.engines.funnels.outside.results import Outcome, record, recorded
from app.integrations.http_guard import PermanentError, TransientError

P = TypeVar("P", bound=Payload)


class Refused(Exception):
    """The effect cannot be carried out as it stands (recorded as a permanent failure)."""

    code = "refused"


class OutsideChannel(ABC, Generic[P]):
    """The shared life of every outside channel; subclasses implement :meth:`call`, typed on
    their payload struct (:mod:`app.engines.funnels.outbox.payloads`)."""

    kind: str | None = None
    """Provider kind loaded for the call (``None``: the channel needs no provider)."""
    payload_type: type[P]
    """The struct of the effects this channel delivers."""

    def __init__(self, deps: ChannelDeps) -> None:
        self.deps = deps

    async def send(self, effect: LeasedEffect) -> str:
        earlier = await recorded(self.deps.db, effect.id)
        if earlier is not None:
            if earlier.ok:
                return _detail(earlier.result)
            raise PermanentDeliveryError(earlier.error or "failed earlier")
        provider = None
        if self.kind is not None:
            async with self.deps.db.read() as session:
                provider = await provider_config.load(
                    session, self.deps.secrets, effect.workspace_id, self.kind
                )
            if provider is None:
                # The workspace may configure it yet: retried until the attempts run out.
                raise TransientDeliveryError(f"no {self.kind} provider is configured")
        payload = effect.payload_as(self.payload_type)
        try:
            result = await self.call(effect, payload, provider)
        except TransientError as exc:
            raise TransientDeliveryError(str(exc), retry_after=exc.retry_after) from exc
        except (PermanentError, Refused) as exc:
            code = exc.code or "failed"
            await self._record(effect, Outcome(False, {"code": code}, str(exc)))
            raise PermanentDeliveryError(str(exc)) from exc
        except LookupError as exc:
            raise TransientDeliveryError(str(exc)) from exc
        await self._record(effect, Outcome(True, result, None))
        return _detail(result)

    @abstractmethod
    async def call(self, effect: LeasedEffect, p: P, provider: Provider | None) -> dict[str, Any]:
        """Perform the effect against the provider; the result is stored with the delivery."""

    async def _record(self, effect: LeasedEffect, outcome: Outcome) -> None:
        request = effect.payload if isinstance(effect.payload, Request) else None
        await record(
            self.deps.db,
            outbox_id=effect.id,
            workspace_id=effect.workspace_id,
            outcome=outcome,
            run_id=None if request is None else request.run_id,
            node_id=None if request is None else request.node_id,
            now=self.deps.clock.now(),
        )

    async def contact(self, effect: LeasedEffect) -> Contact:
        async with self.deps.db.read() as session:
            found = await session.get(Contact, effect.contact_id)
        if found is None:
            raise Refused("the contact no longer exists")
        return found


def _detail(result: dict[str, Any]) -> str:
    for name in ("message_id", "notification_id", "letter_id", "payment_id", "booking_id"):
        if result.get(name):
            return str(result[name])
    if "status" in result:
        return f"HTTP {result['status']}"
    if "text" in result:
        return "generated (cached)" if result.get("cached") else "generated"
    return str(result.get("summary", "done"))
