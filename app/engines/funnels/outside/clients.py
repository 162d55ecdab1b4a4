"""One provider client per workspace credential, built from its configuration on first use and
kept by the process's :class:`ProviderClients` (closed at shutdown). A changed configuration has a
new fingerprint, so the next delivery builds a new client; nothing is retried in-process: the
outbox retries the effect later with the same idempotency key, so a worker is never held by a
provider's backoff.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from app.clock import Clock
from app.engines.funnels.outside.config import HttpOptions, Provider, SmsOptions
from app.integrations.ai import ChatClient
from app.integrations.booking import BookingClient
from app.integrations.http_guard import NO_RETRY, AddressGuard, ClientOptions, GuardedHttp
from app.integrations.letter import JsonLetterClient
from app.integrations.payments import PaymentsClient
from app.integrations.push import JsonPushClient
from app.integrations.sms import JsonSmsClient, SmsSender, TwilioSmsClient

C = TypeVar("C")


def _secret(provider: Provider) -> str:
    if not provider.secret:
        raise LookupError(f"the {provider.kind} provider has no credential stored")
    return provider.secret


class ProviderClients:
    """The outside channels' clients of one process: one per provider configuration (by its
    fingerprint) and one guarded HTTP client per distinct ``http_request`` limit, all going
    through the process's address guard and measuring on its clock."""

    def __init__(
        self, clock: Clock, guard: AddressGuard, options: ClientOptions | None = None
    ) -> None:
        self.clock = clock
        self.guard = guard
        self.options = options or ClientOptions()
        """The operator's outbound settings (``OUTBOUND_HTTP_TIMEOUT``, ``OUTBOUND_USER_AGENT``) for
        every provider."""
        self._built: dict[str, Any] = {}

    def _once(self, key: str, build: Callable[[], C]) -> C:
        if key not in self._built:
            self._built[key] = build()
        client: C = self._built[key]
        return client

    def _for(self, provider: Provider, build: Callable[[], C]) -> C:
        return self._once(f"provider:{provider.fingerprint()}", build)

    def sms(self, provider: Provider) -> SmsSender:
        options: SmsOptions = provider.options
        if provider.shape == "twilio":
            return self._for(
                provider,
                lambda: TwilioSmsClient(
                    account_sid=options.account_sid or "",
                    auth_token=_secret(provider),
                    from_number=options.sender,
                    messaging_service_sid=options.messaging_service_sid,
                    status_callback=options.status_callback,
                    base_url=provider.base_url,
                    policy=NO_RETRY,
                    clock=self.clock,
                    guard=self.guard,
                    timeout=self.options.timeout_seconds,
                    user_agent=self.options.user_agent,
                ),
            )
        return self._for(
            provider,
            lambda: JsonSmsClient(
                base_url=provider.base_url,
                api_key=_secret(provider),
                default_sender=options.sender,
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def push(self, provider: Provider) -> JsonPushClient:
        return self._for(
            provider,
            lambda: JsonPushClient(
                base_url=provider.base_url,
                api_key=_secret(provider),
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def letter(self, provider: Provider) -> JsonLetterClient:
        return self._for(
            provider,
            lambda: JsonLetterClient(
                base_url=provider.base_url,
                api_key=_secret(provider),
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def payments(self, provider: Provider) -> PaymentsClient:
        return self._for(
            provider,
            lambda: PaymentsClient(
                secret_key=_secret(provider),
                base_url=provider.base_url,
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def booking(self, provider: Provider) -> BookingClient:
        return self._for(
            provider,
            lambda: BookingClient(
                base_url=provider.base_url,
                api_key=_secret(provider),
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def ai(self, provider: Provider) -> ChatClient:
        return self._for(
            provider,
            lambda: ChatClient(
                api_key=_secret(provider),
                base_url=provider.base_url,
                policy=NO_RETRY,
                clock=self.clock,
                guard=self.guard,
                timeout=self.options.timeout_seconds,
                user_agent=self.options.user_agent,
            ),
        )

    def http(self, options: HttpOptions) -> GuardedHttp:
        """One guarded client per distinct (timeout, size limit), shared by every workspace: it
        holds no credentials and keeps no connection alive."""
        return self._once(
            f"http:{options.timeout_seconds}:{options.max_response_bytes}",
            lambda: GuardedHttp(
                guard=self.guard,
                timeout=options.timeout_seconds,
                max_response_bytes=options.max_response_bytes,
                user_agent=self.options.user_agent,
                policy=NO_RETRY,
                clock=self.clock,
            ),
        )

    async def aclose(self) -> None:
        """Close every client built so far, the newest first."""
        built, self._built = list(self._built.values()), {}
        for client in reversed(built):
            close = getattr(client, "aclose", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
