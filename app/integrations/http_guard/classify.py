"""The one answer to "may the same request succeed later?" for every outbound call.

Every client — HTTP providers, the guarded ``http_request`` action, the Graph API, Google, the SERP
provider, SNS and SMTP — asks here instead of comparing statuses itself, so a 429 or a read
timeout is retried the same way wherever it happens:

* an HTTP status: 5xx, 408 Request Timeout, 425 Too Early and 429 Too Many Requests say "not now";
  every other 4xx says "never" (:func:`is_transient_status`);
* an ``httpx`` failure instead of an answer: the network (connect, read, write, pool timeouts, a
  dropped connection) may do better later; a request that cannot even be written (a header with
  characters HTTP cannot carry, a scheme httpx does not speak) never will
  (:func:`classify_exception`);
* an SMTP reply: 5xx is final, 4xx is "try again later" (:func:`is_transient_smtp_reply`).

How long to wait comes from ``Retry-After`` (:func:`app.integrations.http_guard.retry.retry_after_seconds`).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

TRANSIENT_4XX = frozenset({408, 425, 429})
"""408 Request Timeout, 425 Too Early and 429 Too Many Requests: "not now", not "never"."""
RATE_LIMITED = 429
_GATEWAY_GAVE_UP = frozenset({502, 504})

NOT_SENT = "not_sent"
"""``code`` of a failure before the request reached the provider (the connection never opened):
retrying cannot duplicate an effect, even on an API without idempotency keys."""
TIMEOUT = "timeout"
NETWORK = "network"
UNSENDABLE = "unsendable"


def is_transient_status(status: int) -> bool:
    """The one classification of an HTTP status: may the same request succeed later?"""
    return is_server_error(status) or status in TRANSIENT_4XX


def is_server_error(status: int) -> bool:
    """A 5xx: the provider failed, not the request (transient whatever the body says)."""
    return 500 <= status < 600


def is_client_error(status: int) -> bool:
    """A 4xx: the provider looked at the request and refused it (so it did not carry it out)."""
    return 400 <= status < 500


def is_rate_limited(status: int | None) -> bool:
    """A 429: refused for now because of the request rate (nothing was carried out)."""
    return status == RATE_LIMITED


def gateway_gave_up(status: int) -> bool:
    """502/504: a gateway in between gave up, possibly after handing the request on — the
    provider may have carried it out."""
    return status in _GATEWAY_GAVE_UP


@dataclass(frozen=True, slots=True)
class Failure:
    """What an exception raised instead of an answer means for a retry."""

    transient: bool
    code: str
    """:data:`NOT_SENT`, :data:`TIMEOUT`, :data:`NETWORK` or :data:`UNSENDABLE`."""
    reason: str
    """A short, credential-free description ("timed out (ReadTimeout)")."""

    @property
    def sent(self) -> bool:
        """False when the request certainly never reached the provider."""
        return self.code not in (NOT_SENT, UNSENDABLE)


def classify_exception(exc: httpx.HTTPError) -> Failure:
    """Classify an ``httpx`` failure: transient unless the request itself cannot be sent."""
    name = type(exc).__name__
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return Failure(True, NOT_SENT, f"could not connect ({name})")
    if isinstance(exc, httpx.TimeoutException):
        return Failure(True, TIMEOUT, f"timed out ({name})")
    if isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol)):
        return Failure(False, UNSENDABLE, f"the request could not be sent ({name})")
    if isinstance(exc, httpx.TransportError):
        return Failure(True, NETWORK, f"connection failed ({name})")
    return Failure(False, NETWORK, f"unusable answer ({name})")


def is_transient_smtp_reply(code: int) -> bool:
    """An SMTP reply code: only a 5xx is a final refusal; a 4xx (or a reply the conversation did
    not expect) asks to try again later."""
    return code < 500
