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
from app.integrations.http_guard import NO_RETRY, GuardedHttp, Resolver
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


def sms_client(resources: Resources, provider: Provider, clock: Clock) -> SmsSender:
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
        ),
    )


def push_client(resources: Resources, provider: Provider, clock: Clock) -> JsonPushClient:
    return resources.get(
        _key(provider),
        lambda: JsonPushClient(
            base_url=provider.base_url, api_key=_secret(provider), policy=NO_RETRY, clock=clock
        ),
    )


def letter_client(resources: Resources, provider: Provider, clock: Clock) -> JsonLetterClient:
    return resources.get(
        _key(provider),
        lambda: JsonLetterClient(
            base_url=provider.base_url, api_key=_secret(provider), policy=NO_RETRY, clock=clock
        ),
    )


def payments_client(resources: Resources, provider: Provider, clock: Clock) -> PaymentsClient:
    return resources.get(
        _key(provider),
        lambda: PaymentsClient(
            secret_key=_secret(provider), base_url=provider.base_url, policy=NO_RETRY, clock=clock
        ),
    )


def booking_client(resources: Resources, provider: Provider, clock: Clock) -> BookingClient:
    return resources.get(
        _key(provider),
        lambda: BookingClient(
            base_url=provider.base_url, api_key=_secret(provider), policy=NO_RETRY, clock=clock
        ),
    )


def ai_client(resources: Resources, provider: Provider, clock: Clock) -> ChatClient:
    return resources.get(
        _key(provider),
        lambda: ChatClient(
            api_key=_secret(provider), base_url=provider.base_url, policy=NO_RETRY, clock=clock
        ),
    )


def guarded_http(
    resources: Resources, options: HttpOptions, clock: Clock, resolver: Resolver | None
) -> GuardedHttp:
    """One guarded client per distinct (timeout, size limit), shared by every workspace: it holds
    no credentials and keeps no connection alive."""
    key = f"funnels.outside.http:{options.timeout_seconds}:{options.max_response_bytes}:{id(resolver)}"
    return resources.get(
        key,
        lambda: GuardedHttp(
            resolver=resolver,
            timeout=options.timeout_seconds,
            max_response_bytes=options.max_response_bytes,
            policy=NO_RETRY,
            clock=clock,
        ),
    )
