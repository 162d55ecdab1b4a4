"""Outbound HTTP that is safe to aim at anything: the ``http_request`` action's guarded client, and
the failure policy every provider client shares.

How the ``http_request`` executor calls it (one :class:`GuardedHttp` per process, e.g. from
``ctx.resources.get("http_guard", lambda: GuardedHttp(timeout=…, max_response_bytes=…))``)::

    result = await guarded.request(
        HttpRequest(method="POST", url=rendered_url, headers=rendered_headers, body=rendered_body),
        allow_private=workspace.allow_private_http,
        idempotency_key=outbox_row.idempotency_key,
    )
    run_context[node_id] = msgspec.to_builtins(result)   # status, url, headers, body, data

It raises :class:`TargetRefused` (permanent: record it, do not retry) for private, loopback,
link-local, unspecified or multicast targets, literal or resolved; :class:`ResponseTooLarge` past the
size limit; :class:`TransientError` for timeouts, 5xx and 429 (retry the effect later, not before
``retry_after``); :class:`PermanentError` for other 4xx and malformed requests.

Provider clients use :class:`ProviderHttp` (one ``httpx.AsyncClient``, classification, retries)
and :func:`decode` (untrusted JSON into msgspec structs).
"""

from app.integrations.http_guard.addresses import refusal_reason
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
from app.integrations.http_guard.retry import NO_RETRY, RetryPolicy

__all__ = [
    "NOT_SENT",
    "NO_RETRY",
    "GuardedHttp",
    "HttpRequest",
    "HttpResult",
    "InvalidResponse",
    "OutboundError",
    "PermanentError",
    "ProviderHttp",
    "Resolver",
    "ResponseTooLarge",
    "RetryPolicy",
    "StaticResolver",
    "SystemResolver",
    "TargetRefused",
    "TransientError",
    "decode",
    "refusal_reason",
]
