"""The one outbound HTTP core: every call to an outside API goes through it.

* :func:`outbound_client` — the one ``httpx.AsyncClient`` factory (timeouts, limits, user agent, no
  environment proxies, no automatic redirects), options from settings by
  :meth:`ClientOptions.from_settings`.
* :class:`OutboundError` — the root of every integration's errors; ``transient`` says whether
  the same request may succeed later (:class:`TransientError`: 5xx, 408/425/429, timeouts, dropped
  connections, with ``retry_after`` when the provider said) or never (:class:`PermanentError`:
  other 4xx, refused targets, :class:`InvalidResponse`). :mod:`~app.integrations.http_guard.classify`
  is the one classification of statuses and failures (:func:`is_transient_status`,
  :func:`classify_exception`, :func:`is_transient_smtp_reply`); no client compares statuses itself.
* :class:`RetryPolicy` — the one retry loop (:meth:`RetryPolicy.run`) with an injected sleep;
  ``RetryPolicy(schedule=AD_RULES_SCHEDULE)`` is the ad rules' 1 s / 2 s rule, :data:`NO_RETRY`
  leaves retries to an outbox.
* :class:`AddressGuard` — every URL a user or a workspace can set: :meth:`AddressGuard.check_url`
  at configuration, and ``outbound_client(guard=…)`` / :class:`GuardedHttp` at every connection
  (resolve, refuse private/loopback/link-local/metadata in every encoding, pin, redirects checked
  again). :func:`shared_guard` is the process's one guard, built from the operator's
  ``OUTBOUND_ALLOW_PRIVATE``.
* :class:`ProviderHttp` — a provider account's client (classification, retries, :func:`decode`);
  :class:`GuardedHttp` — the ``http_request`` action and webhooks (redirects, size limit).

A provider client::

    http = ProviderHttp(provider="stripe", base_url=url, headers=creds, guard=guard)
    response = await http.send("POST", "/v1/payment_intents", form=..., idempotency_key=key)
    intent = decode(response, PaymentIntent, provider="stripe")

The ``http_request`` action::

    result = await guarded.request(
        HttpRequest(method="POST", url=rendered_url, headers=rendered_headers, body=rendered_body),
        allow_private=workspace.allow_private_http,
        idempotency_key=outbox_row.idempotency_key,
    )
"""

from app.integrations.http_guard.address_guard import AddressGuard, GuardedTransport, parse_url
from app.integrations.http_guard.addresses import refusal_reason
from app.integrations.http_guard.classify import (
    Failure,
    classify_exception,
    gateway_gave_up,
    is_client_error,
    is_rate_limited,
    is_server_error,
    is_transient_smtp_reply,
    is_transient_status,
)
from app.integrations.http_guard.client import (
    GUARD_RESOURCE,
    ClientOptions,
    address_guard,
    outbound_client,
    shared_guard,
)
from app.integrations.http_guard.errors import (
    InvalidResponse,
    OutboundError,
    PermanentError,
    ResponseTooLarge,
    TargetRefused,
    TransientError,
)
from app.integrations.http_guard.guard import GuardedHttp, HttpRequest, HttpResult
from app.integrations.http_guard.provider import NOT_SENT, ProviderHttp, decode
from app.integrations.http_guard.resolver import Resolver, StaticResolver, SystemResolver
from app.integrations.http_guard.retry import AD_RULES_SCHEDULE, NO_RETRY, RetryLog, RetryPolicy

__all__ = [
    "AD_RULES_SCHEDULE",
    "GUARD_RESOURCE",
    "NOT_SENT",
    "NO_RETRY",
    "AddressGuard",
    "ClientOptions",
    "Failure",
    "GuardedHttp",
    "GuardedTransport",
    "HttpRequest",
    "HttpResult",
    "InvalidResponse",
    "OutboundError",
    "PermanentError",
    "ProviderHttp",
    "Resolver",
    "ResponseTooLarge",
    "RetryLog",
    "RetryPolicy",
    "StaticResolver",
    "SystemResolver",
    "TargetRefused",
    "TransientError",
    "address_guard",
    "classify_exception",
    "decode",
    "gateway_gave_up",
    "is_client_error",
    "is_rate_limited",
    "is_server_error",
    "is_transient_smtp_reply",
    "is_transient_status",
    "outbound_client",
    "parse_url",
    "refusal_reason",
    "shared_guard",
]
