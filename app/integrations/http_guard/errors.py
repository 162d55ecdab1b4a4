"""Errors of outbound calls, classified for whoever decides about retrying.

Every client in ``app.integrations`` raises only these. A :class:`TransientError` means "the same
request may succeed later" (a 5xx, a 429, a timeout, a dropped connection): the caller retries the
effect with the *same* idempotency key, no sooner than ``retry_after`` when the provider said so. A
:class:`PermanentError` means "this request will never succeed as it is" (a 4xx, a refused target, a
response that is not what the API promises): the caller records it and stops.

Messages never contain credentials: they are built from the provider's name, the status and the
provider's own (truncated) error text.
"""

from __future__ import annotations


class OutboundError(Exception):
    """A call to an outside API failed."""

    transient = False
    repeatable = True
    """False when sending the same request again could repeat an effect the provider may already
    have carried out (the answer to a request without an idempotency key was lost): the
    in-process retry stops there, and the caller decides."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{provider}: {message}")
        self.message = message
        self.provider = provider
        self.status = status
        self.code = code
        self.retry_after = retry_after
        """Seconds the provider asked us to wait before trying again, when it said so."""


class TransientError(OutboundError):
    """Worth retrying later with the same idempotency key."""

    transient = True


class PermanentError(OutboundError):
    """Retrying the same request cannot help."""


class InvalidResponse(PermanentError):
    """The provider answered something that is not the documented shape (garbage, wrong type)."""


class TargetRefused(PermanentError):
    """The URL points somewhere outbound requests may not go (a private or local address)."""


class ResponseTooLarge(PermanentError):
    """The response body exceeded the configured size limit."""
