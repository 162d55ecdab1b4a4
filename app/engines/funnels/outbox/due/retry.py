"""When a try that failed for now is due again: exponential backoff from the first try, never
sooner than the provider asked, never later than six hours."""

from __future__ import annotations

from datetime import datetime, timedelta

MAX_DELAY_SECONDS = 6 * 3600


def retry_at(
    at: datetime, *, attempts: int, base_seconds: float, retry_after: float | None = None
) -> datetime:
    """The next try of an effect tried ``attempts`` times, the last one failing at ``at``."""
    delay = max(base_seconds * 2 ** (attempts - 1), retry_after or 0)
    return at + timedelta(seconds=min(delay, MAX_DELAY_SECONDS))
