"""Client of a generic JSON print-and-mail provider: ``POST {base}/v1/letters`` with a bearer key.

The request is ``{"to": address, "from": address, "content": HTML, "color", "description"}``; the
answer ``{"id", "status", "expected_delivery_date"}``. The effect's idempotency key travels in
``Idempotency-Key`` — a letter printed twice is a letter paid for twice.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx
import msgspec

from app.clock import Clock
from app.integrations.http_guard import AddressGuard, ProviderHttp, RetryPolicy, decode
from app.integrations.http_guard.user_agent import USER_AGENT

PROVIDER = "letter"


class PostalAddress(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    line1: str
    city: str
    postal_code: str
    country: str
    """ISO 3166-1 alpha-2 (``DE``, ``US``)."""
    line2: str | None = None
    state: str | None = None


class Letter(msgspec.Struct, frozen=True, kw_only=True):
    to: PostalAddress
    content: str
    """Rendered HTML of the letter."""
    sender: PostalAddress | None = None
    """Return address; the provider account's default when ``None``."""
    color: bool = False
    description: str | None = None


class LetterReceipt(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    letter_id: str
    status: str
    expected_delivery_date: date | None = None


class _Accepted(msgspec.Struct, frozen=True):
    id: str
    status: str
    expected_delivery_date: date | None = None


class JsonLetterClient:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float = 20.0,
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

    async def send(self, letter: Letter, *, idempotency_key: str) -> LetterReceipt:
        payload: dict[str, Any] = {
            "to": msgspec.to_builtins(letter.to),
            "content": letter.content,
            "color": letter.color,
        }
        if letter.sender is not None:
            payload["from"] = msgspec.to_builtins(letter.sender)
        if letter.description:
            payload["description"] = letter.description
        response = await self._http.send(
            "POST", "/v1/letters", json=payload, idempotency_key=idempotency_key
        )
        accepted = decode(response, _Accepted, provider=PROVIDER)
        return LetterReceipt(
            provider=PROVIDER,
            letter_id=accepted.id,
            status=accepted.status,
            expected_delivery_date=accepted.expected_delivery_date,
        )
