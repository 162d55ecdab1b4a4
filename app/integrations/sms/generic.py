"""Client of a generic JSON SMS provider: ``POST {base}/v1/messages`` with a bearer API key.

The request is ``{"to", "from", "body"}``; the answer ``{"id", "status"}``. The effect's
idempotency key travels in ``Idempotency-Key``, which the provider uses to recognise a retry.
"""

from __future__ import annotations

import httpx
import msgspec

from app.clock import Clock
from app.integrations.http_guard import AddressGuard, ProviderHttp, RetryPolicy, decode
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.sms.message import SmsMessage, SmsReceipt

PROVIDER = "sms"


class _Accepted(msgspec.Struct, frozen=True):
    id: str
    status: str


class JsonSmsClient:
    """One SMS provider account."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        default_sender: str | None = None,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._default_sender = default_sender
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

    async def send(
        self, message: SmsMessage, *, idempotency_key: str, previously_attempted: bool = False
    ) -> SmsReceipt:
        # The provider deduplicates by key, so an earlier attempt needs no special handling.
        payload = {
            "to": message.to,
            "from": message.sender or self._default_sender,
            "body": message.body,
        }
        response = await self._http.send(
            "POST", "/v1/messages", json=payload, idempotency_key=idempotency_key
        )
        accepted = decode(response, _Accepted, provider=PROVIDER)
        return SmsReceipt(provider=PROVIDER, message_id=accepted.id, status=accepted.status)
