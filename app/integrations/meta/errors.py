"""Graph API errors, classified as Meta documents them: transient ones are worth retrying with
backoff, everything else (invalid parameter, expired token, missing permission) is permanent and is
recorded, not retried.
"""

from __future__ import annotations

import msgspec

from app.integrations.http_guard import OutboundError, is_transient_status
from app.integrations.http_guard.classify import is_server_error

TRANSIENT_CODES = frozenset({1, 2, 4, 17, 32, 341, 613, *range(80000, 80015)})
"""Error codes Meta marks as temporary: unknown/service errors, app, user and ad-account rate
limits, and the business-use-case throttles 80000–80014."""

THROTTLE_CODES = frozenset({4, 17, 32, 613, *range(80000, 80015)})


class GraphErrorDetail(msgspec.Struct):
    message: str = ""
    type: str = ""
    code: int = 0
    error_subcode: int | None = None
    is_transient: bool = False
    fbtrace_id: str | None = None


class GraphErrorBody(msgspec.Struct):
    error: GraphErrorDetail


class MetaError(OutboundError):
    """A Graph API call failed. ``transient`` says whether retrying can help; the shared
    :class:`~app.integrations.http_guard.RetryPolicy` reads it and ``retry_after``."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: int | None = None,
        subcode: int | None = None,
        error_type: str = "",
        transient: bool = False,
        retry_after_seconds: float | None = None,
        fbtrace_id: str | None = None,
    ) -> None:
        super().__init__(message, provider="meta", status=status, retry_after=retry_after_seconds)
        self.code: int | None = code  # type: ignore[assignment]  # Meta's codes are numbers
        self.subcode = subcode
        self.error_type = error_type
        self.transient = transient
        self.fbtrace_id = fbtrace_id

    @property
    def retry_after_seconds(self) -> float | None:
        """Meta's ``estimated_time_to_regain_access`` (the core's ``retry_after``)."""
        return self.retry_after

    @retry_after_seconds.setter
    def retry_after_seconds(self, value: float | None) -> None:
        self.retry_after = value

    @property
    def throttled(self) -> bool:
        return self.code in THROTTLE_CODES

    def describe(self) -> str:
        """One line for records and logs: status, code and Meta's message (never the token)."""
        parts = []
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.code is not None:
            parts.append(f"code {self.code}" + (f"/{self.subcode}" if self.subcode else ""))
        parts.append("transient" if self.transient else "permanent")
        return f"{self.message} ({', '.join(parts)})"

    def __str__(self) -> str:
        return self.describe()


def is_transient_code(code: int | None, status: int | None, flagged: bool) -> bool:
    if flagged:
        return True
    if status is not None and is_server_error(status):
        return True  # a 4xx carries a Graph code, which decides
    return code in TRANSIENT_CODES


_error_decoder = msgspec.json.Decoder(GraphErrorBody)


def error_from_response(
    status: int, body: bytes, *, retry_after_seconds: float | None = None
) -> MetaError:
    """Turn a non-2xx Graph reply into a :class:`MetaError` (an unreadable body is kept short)."""
    try:
        detail = _error_decoder.decode(body).error
    except msgspec.DecodeError:
        snippet = body[:200].decode("utf-8", "replace").strip() or "empty body"
        return MetaError(
            f"unexpected reply from the Graph API: {snippet}",
            status=status,
            transient=is_transient_status(status),
            retry_after_seconds=retry_after_seconds,
        )
    transient = is_transient_code(detail.code, status, detail.is_transient)
    return MetaError(
        detail.message or f"Graph API error {detail.code}",
        status=status,
        code=detail.code,
        subcode=detail.error_subcode,
        error_type=detail.type,
        transient=transient,
        retry_after_seconds=retry_after_seconds if transient else None,
        fbtrace_id=detail.fbtrace_id,
    )


def decode_error(what: str, exc: Exception) -> MetaError:
    """Meta answered 2xx with a shape we do not understand: a permanent, recorded error."""
    return MetaError(f"unexpected {what} from the Graph API: {exc}", transient=False)
