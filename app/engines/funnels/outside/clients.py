"""One provider client per workspace credential, built from its configuration and kept in the
process's shared resources (closed at shutdown). A changed configuration has a new fingerprint, so
the next delivery builds a new client; nothing is retried in-process: the outbox retries the
effect later with the same idempotency key, so a worker is never held by a provider's backoff.
"""

from __future__ import annotations

from app.clock import Clock
from app.engines.funnels.outside.config import HttpOptions, Provider, SmsOptions
from app.integrations.ai import ChatClient
from app.integrations.booking import BookingClient
from app.integrations.http_guard import NO_RETRY, AddressGuard, GuardedHttp
from app.integrations.letter import JsonLetterClient
from app.integrations.payments import PaymentsClient
from app.integrations.push import JsonPushClient
from app.integrations.sms import JsonSmsClient, SmsSender, TwilioSmsClient
from app.scheduling.resources import Resources


def _key(provider: Provider) -> str:
    return f"funnels.outside.{provider.fingerprint()}"


def _secret(provider: Provider) -> str:
    if not provider.secret:
        raise LookupError(f"the {provider.kind} provider has no credential stored")
    return provider.secret


def sms_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> SmsSender:
    options: SmsOptions = provider.options
    if provider.shape == "twilio":
        return resources.get(
            _key(provider),
            lambda: TwilioSmsClient(
                account_sid=options.account_sid or "",
                auth_token=_secret(provider),
                from_number=options.sender,
                messaging_service_sid=options.messaging_service_sid,
                status_callback=options.status_callback,
                base_url=provider.base_url,
                policy=NO_RETRY,
                clock=clock,
                guard=guard,
            ),
        )
    return resources.get(
        _key(provider),
        lambda: JsonSmsClient(
            base_url=provider.base_url,
            api_key=_secret(provider),
            default_sender=options.sender,
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def push_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> JsonPushClient:
    return resources.get(
        _key(provider),
        lambda: JsonPushClient(
            base_url=provider.base_url,
            api_key=_secret(provider),
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def letter_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> JsonLetterClient:
    return resources.get(
        _key(provider),
        lambda: JsonLetterClient(
            base_url=provider.base_url,
            api_key=_secret(provider),
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def payments_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> PaymentsClient:
    return resources.get(
        _key(provider),
        lambda: PaymentsClient(
            secret_key=_secret(provider),
            base_url=provider.base_url,
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def booking_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> BookingClient:
    return resources.get(
        _key(provider),
        lambda: BookingClient(
            base_url=provider.base_url,
            api_key=_secret(provider),
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def ai_client(
    resources: Resources, provider: Provider, clock: Clock, guard: AddressGuard
) -> ChatClient:
    return resources.get(
        _key(provider),
        lambda: ChatClient(
            api_key=_secret(provider),
            base_url=provider.base_url,
            policy=NO_RETRY,
            clock=clock,
            guard=guard,
        ),
    )


def guarded_http(
    resources: Resources, options: HttpOptions, clock: Clock, guard: AddressGuard
) -> GuardedHttp:
    """One guarded client per distinct (timeout, size limit), shared by every workspace: it holds
    no credentials and keeps no connection alive."""
    key = f"funnels.outside.http:{options.timeout_seconds}:{options.max_response_bytes}:{id(guard)}"
    return resources.get(
        key,
        lambda: GuardedHttp(
            guard=guard,
            timeout=options.timeout_seconds,
            max_response_bytes=options.max_response_bytes,
            policy=NO_RETRY,
            clock=clock,
        ),
    )
