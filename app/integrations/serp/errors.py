"""Errors of the SERP provider client.

Two families, because the caller reacts differently: a :class:`TransientProviderError` may succeed if
the same request is made later (rate limit, provider outage, timeout) and has already been retried
with backoff by the client; any other :class:`ProviderError` (payment required, invalid request,
rejected credentials, an undecodable answer) will fail again until something changes on our side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.integrations.http_guard import OutboundError

if TYPE_CHECKING:
    from app.integrations.serp.structs import PostedTask


PROVIDER = "serp"


class ProviderError(OutboundError):
    """The provider refused or failed a request, or answered something that cannot be read.

    Attributes:
        status_code: the provider's status code (``40200``, ``40501``, …) when it gave one.
        http_status: the HTTP status of the answer, ``None`` when no answer arrived.
        posted: tasks that earlier chunks of the same ``post_*_tasks`` call did create before this
            failure; they exist at the provider (and are billed), so the caller must keep them.
    """

    transient = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(
            message,
            provider=PROVIDER,
            status=http_status,
            code=str(status_code) if status_code is not None else None,
        )
        self.status_code = status_code
        self.http_status = http_status
        self.posted: list[PostedTask] = []

    def __str__(self) -> str:
        return self.message


class TransientProviderError(ProviderError):
    """A failure that may pass: 5xx, timeouts, rate limit (``40202``), internal error (``50000``).

    Raised once the client's retries are exhausted, or at once when retrying could duplicate work:
    a ``task_post`` whose answer was lost (read timeout, dropped connection) may have created the
    tasks, so it is not sent again and :attr:`may_have_succeeded` is set.
    """

    transient = True

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        http_status: int | None = None,
        may_have_succeeded: bool = False,
    ) -> None:
        super().__init__(message, status_code=status_code, http_status=http_status)
        self.may_have_succeeded = may_have_succeeded
        # The shared retry policy must not send again what the provider may have carried out.
        self.repeatable = not may_have_succeeded


class RateLimited(TransientProviderError):
    """The provider's request rate limit was hit (``40202`` or HTTP 429)."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        http_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, http_status=http_status)
        self.retry_after = retry_after
        """Seconds the provider asked us to wait (``Retry-After``), when it said."""


class PaymentRequired(ProviderError):
    """The provider account has no money left (``40200``); nothing more will run until topped up."""


class InvalidRequest(ProviderError):
    """The provider rejected a field of the request (``40501`` and other ``4xxxx`` codes)."""


class AuthenticationFailed(ProviderError):
    """The provider rejected the login and password (``40100`` / HTTP 401)."""
