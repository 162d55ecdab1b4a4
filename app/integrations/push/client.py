"""Client of a generic JSON push provider: ``POST {base}/v1/notifications`` with a bearer key.

The request is ``{"to": device token, "title", "body", "data", "url"}``; the answer
``{"id", "status"}``. The effect's idempotency key travels in ``Idempotency-Key``. A provider's
``410`` / ``unregistered`` becomes :class:`DeviceUnregistered` so the caller can forget the token.
"""

from __future__ import annotations

from typing import Any

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

PROVIDER = "push"


class PushNotification(msgspec.Struct, frozen=True, kw_only=True):
    device_token: str
    title: str
    body: str
    data: dict[str, str] = msgspec.field(default_factory=dict)
    """Key/value pairs the app receives with the notification."""
    url: str | None = None
    """Opened when the notification is tapped."""


class PushReceipt(msgspec.Struct, frozen=True, kw_only=True):
    provider: str
    notification_id: str
    status: str


class DeviceUnregistered(PermanentError):
    """The device token is dead (the app was uninstalled or the token rotated)."""


class _Accepted(msgspec.Struct, frozen=True):
    id: str
    status: str


class JsonPushClient:
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

    async def send(self, notification: PushNotification, *, idempotency_key: str) -> PushReceipt:
        payload: dict[str, Any] = {
            "to": notification.device_token,
            "title": notification.title,
            "body": notification.body,
            "data": notification.data,
        }
        if notification.url:
            payload["url"] = notification.url
        try:
            response = await self._http.send(
                "POST", "/v1/notifications", json=payload, idempotency_key=idempotency_key
            )
        except PermanentError as exc:
            if exc.status == 410 or exc.code == "unregistered":
                raise DeviceUnregistered(
                    exc.message, provider=PROVIDER, status=exc.status, code="unregistered"
                ) from exc
            raise
        accepted = decode(response, _Accepted, provider=PROVIDER)
        return PushReceipt(provider=PROVIDER, notification_id=accepted.id, status=accepted.status)
