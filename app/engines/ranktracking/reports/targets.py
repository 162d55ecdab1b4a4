"""Target URL per keyword: the page of the tracked domain that should rank. The report flags a
keyword when another page of the domain ranks instead (``other_url``: cannibalisation) and, with
or without a target, when the ranking page changed back and forth within the runs shown
(``alternating``: two or more changes of URL between consecutive ranked measurements)."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from urllib.parse import urlsplit

from app.db.session import WriteSession
from app.engines.ranktracking.keywords import normalise
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.rules import normalise_domain
from app.errors import ValidationFailed

MAX_TARGETS = 5000


def page_key(url: str) -> str:
    """A URL as compared: scheme and ``www.`` ignored, host lower-case, no trailing slash."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    path = parts.path.rstrip("/")
    return host + path + (f"?{parts.query}" if parts.query else "")


def url_flags(target: str | None, latest_url: str | None, window_urls: list[str]) -> list[str]:
    """``window_urls``: the ranking URL of each ranked measurement shown, oldest first."""
    flags = []
    if target and latest_url and page_key(latest_url) != page_key(target):
        flags.append("other_url")
    # Compared as written first (the provider spells a page the same way each time); the
    # normalised form only decides when the raw strings differ often enough.
    if sum(1 for a, b in pairwise(window_urls) if a != b) >= 2:
        keys = [page_key(u) for u in window_urls]
        if sum(1 for a, b in pairwise(keys) if a != b) >= 2:
            flags.append("alternating")
    return flags


def checked_targets(schedule: Schedule, raw: dict[str, str]) -> dict[str, str]:
    if schedule.data_type != "serp":
        raise ValidationFailed.field("targets", "only SERP schedules have target URLs")
    if len(raw) > MAX_TARGETS:
        raise ValidationFailed.field("targets", f"at most {MAX_TARGETS} keywords")
    domain = normalise_domain(schedule.domain or "")
    out: dict[str, str] = {}
    for keyword, url in raw.items():
        kw = normalise(keyword)
        if not kw or not url.strip():
            continue
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower().removeprefix("www.")
        if parts.scheme not in ("http", "https") or not host:
            raise ValidationFailed.field("targets", f"{url!r} is not an http(s) address")
        if host != domain and not host.endswith("." + domain):
            raise ValidationFailed.field("targets", f"{url!r} is not a page of {domain}")
        out[kw] = url.strip()
    return out


async def set_targets(
    session: WriteSession, schedule: Schedule, raw: dict[str, str], now: datetime
) -> dict[str, str]:
    targets = checked_targets(schedule, raw)
    schedule.target_urls = targets or None
    schedule.updated_at = now
    await session.flush()
    return targets
