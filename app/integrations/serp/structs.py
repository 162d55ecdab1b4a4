"""What the SERP client takes and returns: plain, typed values, independent of the wire format.

The provider's JSON is decoded into the wire structs of :mod:`app.integrations.serp.wire` and then
turned into these, so callers never see the envelope, the per-task codes or the provider's spelling.
"""

from __future__ import annotations

from decimal import Decimal

import msgspec

from app.integrations.serp.codes import TASK_CREATED, TaskState, is_transient


class SerpTask(msgspec.Struct, frozen=True):
    """One SERP check to queue: one keyword in one context.

    ``tag`` comes back unchanged with the results (carry the child run id in it). ``device`` is
    ``"desktop"`` or ``"mobile"``; ``depth`` the number of results asked for (10 or 100); ``priority``
    1 for the standard queue, 2 for the priority queue.
    """

    tag: str
    keyword: str
    location_code: int
    language_code: str
    device: str = "desktop"
    depth: int = 100
    priority: int = 1
    postback_url: str | None = None
    """The provider POSTs the finished task (``task_get`` shape) to this URL."""
    pingback_url: str | None = None
    """The provider GETs this URL when the task is finished; ``$id`` and ``$tag`` are substituted."""


class KeywordDataTask(msgspec.Struct, frozen=True):
    """Search volume, competition and CPC for up to 1,000 keywords in one context."""

    tag: str
    keywords: list[str]
    location_code: int
    language_code: str
    postback_url: str | None = None
    pingback_url: str | None = None


class PostedTask(msgspec.Struct, frozen=True):
    """The provider's answer for one queued task: its id (empty if it was refused) and its cost."""

    task_id: str
    tag: str
    status_code: int
    status_message: str
    cost: Decimal
    """What the provider charged for the task, in USD."""

    @property
    def created(self) -> bool:
        return self.status_code == TASK_CREATED


class ReadyTask(msgspec.Struct, frozen=True):
    """A finished task whose results have not been collected yet."""

    task_id: str
    tag: str


class SerpSource(msgspec.Struct, frozen=True):
    """A page an item cites or is made of: an AI Overview reference, a video of a video
    carousel, the answer page of a "people also ask" question."""

    domain: str | None
    url: str | None
    title: str | None = None


class SerpItem(msgspec.Struct, frozen=True):
    """One element of a results page: an organic result, an ad, a featured snippet, …

    ``rank_group`` counts within the element's type (the 3rd organic result has rank_group 3),
    ``rank_absolute`` across every element of the page. Some types have no domain or URL.
    """

    type: str
    rank_group: int
    rank_absolute: int
    domain: str | None
    url: str | None
    title: str | None
    sources: tuple[SerpSource, ...] = ()
    """What the item cites or is made of (an AI Overview's ``references``, a video carousel's
    videos, …), in the page's order; empty for a plain result."""

    def domains(self) -> list[str]:
        """Every domain the item links to: its own, then its sources' (lower-case, de-duplicated,
        in order)."""
        out: list[str] = []
        for host in (self.domain, *(s.domain for s in self.sources)):
            if host and host.lower() not in out:
                out.append(host.lower())
        return out


class SerpTaskResult(msgspec.Struct, frozen=True):
    """A fetched SERP task.

    ``state``: ``"ok"`` (results in ``items``, possibly fewer than the depth asked for),
    ``"in_queue"`` (not finished: poll again), ``"no_results"`` (the provider's explicit empty
    answer) or ``"error"`` (see ``status_code`` / ``status_message``).
    """

    task_id: str
    tag: str
    status_code: int
    state: TaskState
    keyword: str
    items: list[SerpItem]
    cost: Decimal
    status_message: str = ""
    item_types: list[str] = msgspec.field(default_factory=list)
    """The SERP feature types the provider saw on the page (``organic``, ``featured_snippet``, …)."""

    @property
    def retryable(self) -> bool:
        """An ``"error"`` that may pass if the check is queued again."""
        return self.state == "error" and is_transient(self.status_code)

    def find(self, domain: str) -> SerpItem | None:
        """The best organic result of ``domain`` (or one of its subdomains), ``None`` when the
        domain is not within the results returned, i.e. not within the depth asked for."""
        wanted = domain.strip().lower().removeprefix("www.")
        for item in self.items:
            if item.type != "organic" or not item.domain:
                continue
            host = item.domain.lower()
            if host == wanted or host.endswith("." + wanted):
                return item
        return None


class MonthlySearch(msgspec.Struct, frozen=True):
    year: int
    month: int
    search_volume: int | None


class KeywordVolume(msgspec.Struct, frozen=True):
    """Keyword data for one keyword. ``None`` values are the provider's explicit "no data"."""

    keyword: str
    search_volume: int | None
    competition: str | None
    """``"LOW"``, ``"MEDIUM"`` or ``"HIGH"``."""
    cpc: Decimal | None
    """Average cost per click, in USD."""
    monthly_searches: list[MonthlySearch]
    competition_index: int | None = None

    @property
    def has_data(self) -> bool:
        return self.search_volume is not None


class KeywordDataResult(msgspec.Struct, frozen=True):
    """A fetched keyword-data task; ``state`` as in :class:`SerpTaskResult`. Keywords the provider
    left out of ``rows`` were not answered at all (partial result)."""

    task_id: str
    tag: str
    status_code: int
    state: TaskState
    rows: list[KeywordVolume]
    cost: Decimal
    status_message: str = ""

    @property
    def retryable(self) -> bool:
        return self.state == "error" and is_transient(self.status_code)
