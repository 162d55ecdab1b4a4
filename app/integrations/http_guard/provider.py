"""One HTTP client per provider: timeouts, classification of failures, retries, decoding.

Every provider client (SMS, push, letter, payments, booking, AI) sends through a
:class:`ProviderHttp`. It turns every failure into a :class:`TransientError` or a
:class:`PermanentError`, retries transient ones in-process under a :class:`RetryPolicy`, and
:func:`decode` turns a body into a msgspec struct or an :class:`InvalidResponse`.

Credentials live only in the headers of the underlying ``httpx.AsyncClient``; nothing here logs
headers, and error messages carry only the provider's name, the status and the provider's own
error text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
import msgspec

from app.clock import Clock, SystemClock
from app.integrations.http_guard.address_guard import AddressGuard
from app.integrations.http_guard.classify import NOT_SENT, classify_exception, is_transient_status
from app.integrations.http_guard.client import ClientOptions, outbound_client
from app.integrations.http_guard.errors import (
    InvalidResponse,
    OutboundError,
    PermanentError,
    TransientError,
)
from app.integrations.http_guard.retry import RetryPolicy, retry_after_seconds
from app.integrations.http_guard.user_agent import USER_AGENT

log = logging.getLogger("app.integrations")

T = TypeVar("T")

_DETAIL_LIMIT = 300

__all__ = ["NOT_SENT", "ProviderHttp", "decode", "error_detail", "is_transient_status"]


def error_detail(body: bytes) -> tuple[str, str | None]:
    """The provider's error message and code from a JSON error body, whatever its shape.

    Understands ``{"error": {"message", "code"|"type"}}`` (Stripe, OpenAI), ``{"message", "code"}``
    (Twilio and most JSON APIs) and ``{"detail": ...}``; anything else becomes a short excerpt.
    """
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        text = body[:_DETAIL_LIMIT].decode("utf-8", "replace").strip()
        return (text or "no error details"), None
    if isinstance(data, dict):
        inner = data.get("error")
        source = inner if isinstance(inner, dict) else data
        message = source.get("message") or source.get("detail") or inner or "no error details"
        code = source.get("code") or source.get("type")
        return str(message)[:_DETAIL_LIMIT], (str(code) if code is not None else None)
    return str(data)[:_DETAIL_LIMIT], None


def decode(response: httpx.Response, type_: type[T], *, provider: str) -> T:
    """Decode an untrusted JSON body into ``type_``; anything else is an :class:`InvalidResponse`."""
    try:
        return msgspec.json.decode(response.content, type=type_)
    except msgspec.DecodeError as exc:
        raise InvalidResponse(
            f"unexpected response body ({exc})", provider=provider, status=response.status_code
        ) from exc


class ProviderHttp:
    """The single ``httpx.AsyncClient`` of one provider account, with its failure policy.

    Args:
        provider: Name used in errors ("twilio", "stripe", …).
        base_url: The API's root; tests pass a sandbox simulator's URL.
        headers: Default headers, including the credentials.
        auth: Basic-auth pair, when the API uses it.
        timeout: Seconds for connecting, and for each read or write.
        policy: In-process retries of transient failures.
        retry_hint_header: A header by which the provider says whether a failure is worth
            retrying (Stripe's ``Stripe-Should-Retry``); it overrides the status-based guess.
        permanent_codes: Provider error codes that are final whatever the status (OpenAI's
            ``insufficient_quota`` comes as a 429 but will not pass by waiting).
        clock: For ``Retry-After`` given as a date.
        guard: Checks and pins every connection; required when the base URL was set by a user
            or a workspace (every funnel provider).
        transport: An httpx transport (tests of the client alone may pass a MockTransport).
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        retry_hint_header: str | None = None,
        permanent_codes: frozenset[str] = frozenset(),
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.provider = provider
        self.policy = policy or RetryPolicy()
        self._hint = retry_hint_header
        self._permanent_codes = permanent_codes
        self._clock: Clock = clock or SystemClock()
        self._client = outbound_client(
            provider=provider,
            options=ClientOptions(timeout_seconds=timeout, user_agent=user_agent),
            base_url=base_url,
            headers=headers,
            auth=auth,
            guard=guard,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        form: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> httpx.Response:
        """Send with retries of transient failures; returns a 2xx response or raises."""
        return await (policy or self.policy).run(
            lambda: self.send_once(
                method, path, json=json, form=form, params=params, idempotency_key=idempotency_key
            )
        )

    async def send_once(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        form: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> httpx.Response:
        """One try: a 2xx response, or a classified :class:`OutboundError`."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        try:
            response = await self._client.request(
                method, path, json=json, data=form, params=params, headers=headers
            )
        except httpx.TransportError as exc:
            failure = classify_exception(exc)
            error = TransientError if failure.transient else PermanentError
            raise error(failure.reason, provider=self.provider, code=failure.code) from exc
        if 200 <= response.status_code < 300:
            return response
        raise self._classify(response)

    def _classify(self, response: httpx.Response) -> OutboundError:
        status = response.status_code
        message, code = error_detail(response.content)
        message = f"HTTP {status}: {message}"
        retry_after = retry_after_seconds(response.headers, self._clock.now())
        hint = response.headers.get(self._hint, "").lower() if self._hint else ""
        if code in self._permanent_codes:
            hint = "false"
        if hint == "true" or (hint != "false" and is_transient_status(status)):
            return TransientError(
                message, provider=self.provider, status=status, code=code, retry_after=retry_after
            )
        return PermanentError(message, provider=self.provider, status=status, code=code)
