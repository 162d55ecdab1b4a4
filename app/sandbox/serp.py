"""A loopback simulator of the SERP / keyword-data provider (DataForSEO's queued task API).

It speaks the provider's shapes: ``POST …/task_post`` with a JSON array of at most 100 tasks,
``GET …/tasks_ready`` and ``GET …/task_get/regular/{id}`` for Google organic SERPs under
``/v3/serp/google/organic``, and the same trio (``task_get/{id}``) for Google Ads search volume under
``/v3/keywords_data/google_ads/search_volume``, and ``task_post`` / ``task_get/advanced/{id}`` for
Google Maps under ``/v3/serp/google/maps`` (:mod:`~app.sandbox.serp_maps`); HTTP basic authentication; the envelope
``{status_code, status_message, cost, tasks_count, tasks_error, tasks: [...]}`` with the outcome in
``status_code`` and HTTP 200 for almost everything.

Results are deterministic: each (keyword, device, location, language) has a stable ranking of 100
organic results drawn from ``seed``, with ads, a featured snippet and "people also ask" blocks on some
pages (a keyword scripted with ``features`` gets exactly those, in the provider's advanced shapes:
an ``ai_overview`` with its ``references``, a ``local_pack``, ``video`` elements, …); ``depth`` is honoured (a domain ranked 37th is absent from a depth-10 page). Tests program, per
keyword: a domain's position (or its absence from the top 100), an explicit no-data answer
(``40102`` / null volume), a number of polls the task stays in queue (``40602``), a truncated page
(partial result), a keyword left out of a keyword-data answer, or a task error. Envelope faults (rate
limit ``40202``, payment required ``40200``, ``50000``, HTTP 5xx, garbage, delays) are injected
through :class:`~app.sandbox.base.SandboxState`, whose counters count every call by kind
(``serp.task_post``, ``serp.tasks_ready``, ``serp.task_get``, ``keywords.task_post``, …). The cost of
every created task is added to :attr:`SerpSimulator.total_cost` (USD).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import math
import random
import re
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

import httpx
import msgspec
from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.clock import Clock, SystemClock
from app.sandbox.base import (
    Fault,
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)
from app.sandbox.serp_locations import LOCATIONS_PATH, SimulatedLocations
from app.sandbox.serp_maps import (
    LOCAL_FINDER_DEPTH,
    LOCAL_FINDER_PREFIX,
    MAPS_PREFIX,
    MAPS_RESULTS,
    MapsPlacement,
    local_serps,
    maps_items,
    maps_page,
    validate_maps,
)

SERP_PREFIX: Final = "/v3/serp/google/organic"
KEYWORDS_PREFIX: Final = "/v3/keywords_data/google_ads/search_volume"
RANKING_SIZE: Final = 100
MAX_TASKS: Final = 100
MAX_KEYWORDS: Final = 1000

LANGUAGES: Final = frozenset(
    (  # noqa: SIM905 - a word list reads better as one string
        "ar bg cs da de el en es et fi fr he hi hr hu id it ja ko lt lv ms nl no pl pt ro ru sk sl "
        "sr sv th tr uk vi zh-CN zh-TW"
    ).split()
)
_MESSAGES: Final = {
    20000: "Ok.",
    20100: "Task Created.",
    40006: "You can set only one hundred tasks at a time.",
    40100: "You are not authorized to access this resource.",
    40102: "No Search Results.",
    40200: "Payment Required.",
    40202: "Rate limit per minute exceeded.",
    40400: "Not Found.",
    40501: "Invalid Field.",
    40601: "Task Handed.",
    40602: "Task In Queue.",
    50000: "Internal Error.",
}
_encoder = msgspec.json.Encoder(decimal_format="number")
_WORDS: Final = (  # noqa: SIM905 - a word list reads better as one string
    "alpha atlas bright cedar delta ember falcon garden harbor indigo juniper kite lumen maple "
    "nova orbit pine quartz river summit tide union vista willow yonder zenith"
).split()
_TLDS: Final = ("com", "net", "org", "io", "co.uk", "fr", "de")


@dataclass(frozen=True)
class SerpPrices:
    """What the simulated provider charges per created task, in USD.

    A SERP is billed by pages of 10 results: the first page at the queue's price, every further
    page at ``extra_page_factor`` of it (depth 100 = 1 + 9 × 0.75 pages). Keyword data is billed
    per task, whatever its number of keywords.
    """

    serp_page_standard: Decimal = Decimal("0.0006")
    serp_page_priority: Decimal = Decimal("0.0012")
    extra_page_factor: Decimal = Decimal("0.75")
    keyword_data_task: Decimal = Decimal("0.05")
    maps_standard: Decimal = Decimal("0.0006")
    """A Google Maps task (its product page: "$0.0006 per Maps SERP in Standard queue")."""
    maps_priority: Decimal = Decimal("0.0012")

    def maps(self, priority: int) -> Decimal:
        return self.maps_priority if priority == 2 else self.maps_standard

    def serp(self, depth: int, priority: int) -> Decimal:
        page = self.serp_page_priority if priority == 2 else self.serp_page_standard
        pages = max(1, math.ceil(depth / 10))
        return page + page * self.extra_page_factor * (pages - 1)


@dataclass
class KeywordScript:
    """How the simulator answers for one keyword (applies to every device and context)."""

    no_data: bool = False
    """SERP: the task answers ``40102`` "No Search Results"; keyword data: a row of nulls."""
    queue_polls: int = 0
    """Polls (``task_get`` on the task, or ``tasks_ready``) answered "in queue" before it is ready."""
    queue_code: int = 40602
    """The code of those answers: ``40602`` "Task In Queue" or ``40601`` "Task Handed"."""
    partial_items: int | None = None
    """SERP: only the first N organic results come back (a truncated page)."""
    omit: bool = False
    """Keyword data: the keyword is left out of the task's rows (a partial answer)."""
    task_error: int | None = None
    """The task fails with this code at ``task_get`` (``50000``, ``40501``, …)."""
    features: list[str] | None = None
    """SERP: exactly these feature items on the page instead of the seeded ones, in the shapes
    of the provider's advanced results: ``featured_snippet`` (the first organic result's domain
    and URL), ``local_pack`` (three entries, the first with the second organic result's domain),
    ``people_also_ask`` (questions whose ``expanded_element`` answers link to organic results 4
    and 5), ``video`` (``video_element`` items on youtube.com), ``ai_overview`` (an item without
    a domain whose ``references`` cite :attr:`ai_references`), or any other type (an item
    without a domain: ``images``, ``top_stories``, …)."""
    ai_references: list[str] | None = None
    """The domains an ``ai_overview`` cites, in order; by default organic results 1, 3 and 5."""


@dataclass
class _Task:
    id: str
    endpoint: str  # "serp" | "maps" | "local_finder" | "keywords"
    data: dict[str, Any]
    cost: Decimal
    posted_at: datetime
    polls_left: int
    queue_code: int = 40602
    collected: bool = False
    notified: bool = False
    listed: bool = False
    """``tasks_ready`` has returned it: the provider lists a finished task once."""

    @property
    def ready(self) -> bool:
        return self.polls_left <= 0

    @property
    def tag(self) -> str:
        tag = self.data.get("tag")
        return tag if isinstance(tag, str) else ""


class SerpSimulator(HttpSimulator):
    """The simulated provider: its data, programming methods and its Litestar :attr:`app`.
    :meth:`reset` gives back the seed, credentials, prices, limits and clock it was built with
    (whatever a test set them to since) and the starting funds, and forgets every task,
    placement, script, cost and delivery (cancelling the deliveries still on their way).

    Args:
        seed: makes every ranking and keyword volume reproducible.
        login, password: the accepted HTTP basic credentials.
        ready_after_polls: polls every task stays in queue unless its keyword says otherwise.
        prices: the price list of created tasks.
        funds: when set, the account balance in USD; a ``task_post`` that would overdraw it is
            refused with ``40200`` "Payment Required".
        clock: dates ``date_posted`` and the months of ``monthly_searches``.
    """

    ready_calls: dict[str, list[datetime]]
    """When each answered ``tasks_ready`` call was made (on :attr:`clock`), per endpoint."""
    rate_limited: int
    """``tasks_ready`` calls refused for the rate limit."""
    call_times: deque[datetime]
    """When each call of the last minute was answered (the general limit's window)."""
    general_refused: int
    """Calls refused for the general per-minute limit."""
    max_calls_in_a_minute: int
    """The most answered calls seen within 60 s."""
    funds: Decimal | None
    total_cost: Decimal
    deliveries: list[tuple[str, int | str]]
    """Postbacks and pingbacks sent: (url, HTTP status or the error's name)."""
    _tasks: dict[str, _Task]
    _sequence: int
    _scripts: dict[str, KeywordScript]
    _placements: dict[tuple[str, str | None], dict[str, int | None]]
    _pages: dict[tuple[str, str], str]
    _maps_placements: dict[str, dict[str, MapsPlacement]]
    locations: SimulatedLocations
    """The locations list it serves (tests drop or add some)."""

    def __init__(
        self,
        seed: int = 0,
        *,
        login: str = "sandbox",
        password: str = "sandbox-password",  # noqa: S107 - the simulator's own fixed credential
        ready_after_polls: int = 0,
        prices: SerpPrices | None = None,
        funds: Decimal | None = None,
        clock: Clock | None = None,
        tasks_ready_per_minute: int | None = 20,
        calls_per_minute: int | None = 2000,
        ready_until_collected: bool = False,
    ) -> None:
        self.seed = seed
        self._starting_funds = funds
        self.tasks_ready_per_minute = tasks_ready_per_minute
        """The provider's limit of ``tasks_ready`` calls per minute and endpoint (about 20);
        a call over it is answered ``40202`` "Rate limit per minute exceeded". None: no limit."""
        self.calls_per_minute = calls_per_minute
        """The account's general limit: answered calls of any kind within 60 s (2,000 in the
        provider's help centre); a call over it is answered ``40202``. None: no limit."""
        self.ready_until_collected = ready_until_collected
        """``tasks_ready`` as its reference page words it: "completed tasks, which haven't been
        collected yet" — a task stays listed until ``task_get`` collects it. False: each task is
        listed once."""
        self.login = login
        self.password = password
        self.ready_after_polls = ready_after_polls
        self.prices = prices or SerpPrices()
        self.clock: Clock = clock or SystemClock()
        self._built = (self.tasks_ready_per_minute, ready_after_polls, self.prices, self.clock)
        self._built_limits = (calls_per_minute, ready_until_collected)
        self.state = SandboxState()
        # Re-entrant: answering a task (under the lock) reads the placements (under the lock).
        self._lock = threading.RLock()
        self._background: set[asyncio.Task[None]] = set()
        self.reset_data()
        self.app = create_serp_app(self)

    def reset_data(self) -> None:
        with self._lock:
            self.tasks_ready_per_minute, self.ready_after_polls, self.prices, self.clock = (
                self._built
            )
            # A postback made before the reset is not sent on into the next test's world. The
            # simulator may be served from another thread's loop.
            for delivery in list(self._background):
                delivery.get_loop().call_soon_threadsafe(delivery.cancel)
            self.calls_per_minute, self.ready_until_collected = self._built_limits
            self.call_times = deque()
            self.general_refused = 0
            self.max_calls_in_a_minute = 0
            self.funds = self._starting_funds
            self.ready_calls = {"serp": [], "keywords": []}
            self.rate_limited = 0
            self.total_cost = Decimal(0)
            self.deliveries = []
            self._tasks = {}
            self._sequence = 0
            self._scripts = {}
            self._placements = {}
            self._pages = {}
            self._maps_placements = {}
            self.locations = SimulatedLocations()

    def create_app(self) -> Litestar:
        return self.app

    def admit_call(self) -> bool:
        """Count one call against the general per-minute limit; False when it is over it (the
        call is then refused and not counted as answered)."""
        now = self.clock.now()
        with self._lock:
            times = self.call_times
            while times and (now - times[0]).total_seconds() >= 60:
                times.popleft()
            if self.calls_per_minute is not None and len(times) >= self.calls_per_minute:
                self.general_refused += 1
                return False
            times.append(now)
            self.max_calls_in_a_minute = max(self.max_calls_in_a_minute, len(times))
            return True

    def max_ready_calls_per_minute(self, endpoint: str = "serp") -> int:
        """The most answered ``tasks_ready`` calls within any 60 s (for tests and benchmarks)."""
        calls = sorted(self.ready_calls[endpoint])
        best = start = 0
        for end, moment in enumerate(calls):
            while (moment - calls[start]).total_seconds() >= 60:
                start += 1
            best = max(best, end - start + 1)
        return best

    # -- programming -----------------------------------------------------------------------------

    def place(
        self,
        keyword: str,
        domain: str,
        position: int | None,
        *,
        device: str | None = None,
        path: str | None = None,
    ) -> None:
        """Rank ``domain`` at ``position`` (1–100) for ``keyword``, or nowhere in the top 100
        (``None``); for one device or (``device=None``) both. ``path`` is the page of the domain
        that ranks (``/red-shoes`` by default, from the keyword), on every device."""
        if position is not None and not 1 <= position <= RANKING_SIZE:
            raise ValueError(f"position must be 1..{RANKING_SIZE} or None")
        with self._lock:
            self._placements.setdefault((_norm(keyword), device), {})[domain.lower()] = position
            if path is not None:
                self._pages[(_norm(keyword), domain.lower())] = path.lstrip("/")

    def place_business(
        self,
        keyword: str,
        title: str,
        position: int | None,
        *,
        place_id: str,
        cid: str,
        domain: str | None = None,
        at: tuple[float, float] | None = None,
    ) -> None:
        """Put a business on the Google Maps and Local Finder pages of ``keyword`` (every
        location) at ``position`` (1–20), or nowhere (``None``); one located ``at`` (latitude,
        longitude) drops a place per 400 m the search is made from away from it."""
        if position is not None and not 1 <= position <= MAPS_RESULTS:
            raise ValueError(f"position must be 1..{MAPS_RESULTS} or None")
        with self._lock:
            self._maps_placements.setdefault(_norm(keyword), {})[place_id] = MapsPlacement(
                title, position, place_id, cid, domain, *(at or (None, None))
            )

    def script(self, keyword: str, **behaviour: Any) -> KeywordScript:
        """Program how ``keyword`` is answered; see :class:`KeywordScript` for the options."""
        script = KeywordScript(**behaviour)
        with self._lock:
            self._scripts[_norm(keyword)] = script
        return script

    def inject_status(
        self, kind: str, status_code: int, *, times: int = 1, http_status: int = 200
    ) -> Fault:
        """Answer the next ``times`` calls of ``kind`` with an envelope carrying ``status_code``
        (``40202`` rate limit, ``40200`` payment required, ``50000`` internal error, …)."""
        body = _envelope([], status_code=status_code)
        return self.state.inject(kind, status=http_status, raw=_encoder.encode(body), times=times)

    def task(self, task_id: str) -> dict[str, Any] | None:
        """The posted parameters of a task, as the provider stored them."""
        with self._lock:
            task = self._tasks.get(task_id)
            return dict(task.data) if task else None

    @property
    def tasks_posted(self) -> int:
        with self._lock:
            return len(self._tasks)

    # -- deterministic data ----------------------------------------------------------------------

    def ranking(
        self, keyword: str, device: str, location_code: int, language_code: str
    ) -> list[str]:
        """The 100 organic domains, best first, for one context (programmed placements applied)."""
        keyword = _norm(keyword)
        rng = random.Random(f"{self.seed}|{keyword}|{device}|{location_code}|{language_code}")
        slug = _slug(keyword)
        domains: list[str] = []
        seen: set[str] = set()
        while len(domains) < RANKING_SIZE:
            word = rng.choice(_WORDS)
            candidate = rng.choice(
                (f"{word}-{slug}", f"{slug}{word}", f"{word}{rng.randint(1, 99)}", f"{word}-shop")
            )
            domain = f"{candidate[:40]}.{rng.choice(_TLDS)}"
            if domain not in seen:
                seen.add(domain)
                domains.append(domain)
        with self._lock:
            placements = {
                **self._placements.get((keyword, None), {}),
                **self._placements.get((keyword, device), {}),
            }
        ordered = [d for d in domains if d not in placements]
        for domain, position in sorted(
            ((d, p) for d, p in placements.items() if p is not None), key=lambda dp: dp[1]
        ):
            ordered.insert(position - 1, domain)
        return ordered[:RANKING_SIZE]

    def _serp_items(self, data: dict[str, Any], script: KeywordScript) -> list[dict[str, Any]]:
        keyword, device = str(data["keyword"]), str(data["device"])
        location, language = int(data["location_code"]), str(data["language_code"])
        ranking = self.ranking(keyword, device, location, language)
        depth = min(int(data["depth"]), RANKING_SIZE)
        organic_count = depth if script.partial_items is None else min(depth, script.partial_items)
        features = random.Random(f"{self.seed}|features|{_norm(keyword)}|{device}")
        slug = _slug(keyword)
        items: list[dict[str, Any]] = []

        def add(kind: str, rank_group: int, **extra: Any) -> None:
            items.append(
                {"type": kind, "rank_group": rank_group, "rank_absolute": len(items) + 1, **extra}
            )

        paa_after: int | None = None
        if script.features is not None:
            for kind in script.features:
                for rank, extra in _scripted_feature(kind, keyword, ranking, organic_count, script):
                    add(kind, rank, **extra)
        else:
            for n in range(features.choice((0, 0, 1, 2))):
                ad = f"{features.choice(_WORDS)}-ads{n}.com"
                add("paid", n + 1, domain=ad, url=f"https://{ad}/{slug}", title=f"{keyword} deals")
            if features.random() < 0.3 and organic_count:
                top = ranking[0]
                add("featured_snippet", 1, domain=top, url=f"https://{top}/{slug}", title=keyword)
            paa_after = 3 if features.random() < 0.5 else None
        for rank in range(1, organic_count + 1):
            domain = ranking[rank - 1]
            add(
                "organic",
                rank,
                domain=f"www.{domain}" if rank % 3 == 0 else domain,
                url=f"https://{domain}/{self._pages.get((_norm(keyword), domain), slug)}",
                title=f"{keyword.title()} – {domain.split('.')[0]}",
                description=f"Everything about {keyword}.",
            )
            if rank == paa_after:
                add(
                    "people_also_ask",
                    1,
                    domain=None,
                    url=None,
                    title=None,
                    items=_questions(keyword, ranking),
                )
        return items

    def _volume_row(
        self, keyword: str, script: KeywordScript, data: dict[str, Any], now: datetime
    ) -> dict[str, Any]:
        location, language = data["location_code"], data["language_code"]
        row: dict[str, Any] = {
            "keyword": keyword,
            "spell": None,
            "location_code": location,
            "language_code": language,
            "search_partners": False,
        }
        if script.no_data:
            row.update(
                competition=None,
                competition_index=None,
                search_volume=None,
                low_top_of_page_bid=None,
                high_top_of_page_bid=None,
                cpc=None,
                monthly_searches=None,
            )
            return row
        rng = random.Random(f"{self.seed}|volume|{_norm(keyword)}|{location}|{language}")
        volume = int(round(10 ** rng.uniform(1, 5), -1))
        index = rng.randint(0, 100)
        cpc = Decimal(rng.randint(5, 900)) / 100
        months: list[dict[str, Any]] = []
        year, month = now.year, now.month
        for _ in range(12):
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
            months.append(
                {
                    "year": year,
                    "month": month,
                    "search_volume": int(volume * rng.uniform(0.7, 1.3)),
                }
            )
        row.update(
            competition="LOW" if index < 34 else "MEDIUM" if index < 67 else "HIGH",
            competition_index=index,
            search_volume=volume,
            low_top_of_page_bid=cpc * Decimal("0.6"),
            high_top_of_page_bid=cpc * Decimal("1.8"),
            cpc=cpc,
            monthly_searches=months,
        )
        return row

    # -- the provider's behaviour ----------------------------------------------------------------

    def post_tasks(self, endpoint: str, raw: Any) -> tuple[dict[str, Any], list[_Task]]:
        """Validate and queue a ``task_post`` body: the answer's envelope, and the created tasks
        that are ready at once."""
        if not isinstance(raw, list) or not raw:
            return _envelope([], status_code=40501, message="Invalid Field: 'tasks'."), []
        if len(raw) > MAX_TASKS:
            return _envelope([], status_code=40006), []
        now = self.clock.now()
        checked = [_validate(endpoint, item) for item in raw]
        cost = sum(
            (self._price(endpoint, data) for data, error in checked if error is None), Decimal(0)
        )
        created: list[_Task] = []
        with self._lock:
            if self.funds is not None and cost > self.funds:
                return _envelope([], status_code=40200), []
            if self.funds is not None:
                self.funds -= cost
            self.total_cost += cost
            tasks: list[dict[str, Any]] = []
            for data, error in checked:
                self._sequence += 1
                task_id = _task_id(self.seed, self._sequence, now)
                echo = {**_api_data(endpoint, "task_post"), **data}
                if error is not None:
                    tasks.append(_task(task_id, 40501, echo, message=error))
                    continue
                polls, queue_code = self._queueing(endpoint, data)
                task = _Task(
                    id=task_id,
                    endpoint=endpoint,
                    data=data,
                    cost=self._price(endpoint, data),
                    posted_at=now,
                    polls_left=polls,
                    queue_code=queue_code,
                )
                self._tasks[task_id] = task
                created.append(task)
                tasks.append(_task(task_id, 20100, echo, cost=task.cost))
        return _envelope(tasks, cost=cost), [t for t in created if t.ready]

    def tasks_ready(self, endpoint: str) -> tuple[dict[str, Any], list[_Task]]:
        """The ``tasks_ready`` envelope, and the tasks that became ready with this poll.

        As the provider documents it: at most 1,000 tasks a call, each finished task listed
        **once** (a later call does not show it again, collected or not), and about 20 calls a
        minute — a call over :attr:`tasks_ready_per_minute` in the last 60 s gets ``40202``."""
        now = self.clock.now()
        with self._lock:
            calls = self.ready_calls[endpoint]
            recent = sum(1 for t in calls[-200:] if (now - t).total_seconds() < 60)
            if self.tasks_ready_per_minute is not None and recent >= self.tasks_ready_per_minute:
                self.rate_limited += 1
                return _envelope([], status_code=40202), []
            calls.append(now)
            mine = [t for t in self._tasks.values() if t.endpoint == endpoint and not t.collected]
            ready = [t for t in mine if t.ready and (self.ready_until_collected or not t.listed)][
                :1000
            ]
            for listed in ready:
                listed.listed = True
            # Tasks not listed by this poll move one poll closer to being ready.
            became_ready = self._poll(mine)
        result = [_ready_entry(t) for t in ready]
        task = _task(
            _task_id(self.seed, 0, self.clock.now()),
            20000,
            _api_data(endpoint, "tasks_ready"),
            result=result,
        )
        return _envelope([task]), became_ready

    def task_get(self, endpoint: str, task_id: str) -> tuple[dict[str, Any], list[_Task]]:
        """The ``task_get`` envelope of one task, and the tasks that became ready with this poll."""
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or task.endpoint != endpoint:
                return _envelope([_task(task_id, 40400, _api_data(endpoint, "task_get"))]), []
            answer = self._task_answer(task)
            if task.ready:
                task.collected = True
            became_ready = self._poll([task])
        return _envelope([answer]), became_ready

    def _task_answer(self, task: _Task) -> dict[str, Any]:
        """A task as ``task_get`` (and a postback) shows it."""
        echo = {**_api_data(task.endpoint, "task_get"), **task.data}
        if not task.ready:
            return _task(task.id, task.queue_code, echo, cost=task.cost)
        if task.endpoint in ("maps", "local_finder"):
            return self._maps_answer(task, echo)
        if task.endpoint == "serp":
            script = self._scripts.get(_norm(task.data["keyword"])) or KeywordScript()
            if script.task_error is not None:
                return _task(task.id, script.task_error, echo, cost=task.cost)
            if script.no_data:
                return _task(task.id, 40102, echo, cost=task.cost)
            items = self._serp_items(task.data, script)
            page = {
                "keyword": task.data["keyword"],
                "type": "organic",
                "se_domain": "google.com",
                "location_code": task.data["location_code"],
                "language_code": task.data["language_code"],
                "check_url": "https://www.google.com/search?q="
                + _slug(task.data["keyword"]).replace("-", "+"),
                "datetime": _provider_time(task.posted_at),
                "spell": None,
                "item_types": sorted({i["type"] for i in items}),
                "se_results_count": 1000 + len(items) * 1713,
                "items_count": len(items),
                "items": items,
            }
            return _task(task.id, 20000, echo, cost=task.cost, result=[page])
        keywords: list[str] = task.data["keywords"]
        scripts = {k: self._scripts.get(_norm(k)) or KeywordScript() for k in keywords}
        for script in scripts.values():
            if script.task_error is not None:
                return _task(task.id, script.task_error, echo, cost=task.cost)
        rows = [
            self._volume_row(k, s, task.data, task.posted_at)
            for k, s in scripts.items()
            if not s.omit
        ]
        return _task(task.id, 20000, echo, cost=task.cost, result=rows)

    def _maps_answer(self, task: _Task, echo: dict[str, Any]) -> dict[str, Any]:
        keyword = _norm(task.data["keyword"])
        script = self._scripts.get(keyword) or KeywordScript()
        if script.task_error is not None:
            return _task(task.id, script.task_error, echo, cost=task.cost)
        if script.no_data:
            return _task(task.id, 40102, echo, cost=task.cost)
        placements = list(self._maps_placements.get(keyword, {}).values())
        finder = task.endpoint == "local_finder"
        items = maps_items(self.seed, task.data, keyword, placements, local_finder=finder)
        page = maps_page(task.data, items, _provider_time(task.posted_at), local_finder=finder)
        return _task(task.id, 20000, echo, cost=task.cost, result=[page])

    def _poll(self, tasks: Any) -> list[_Task]:
        became_ready: list[_Task] = []
        for task in tasks:
            if not task.ready:
                task.polls_left -= 1
                if task.ready:
                    became_ready.append(task)
        return became_ready

    def _queueing(self, endpoint: str, data: dict[str, Any]) -> tuple[int, int]:
        """(polls answered "in queue", the code they carry) for a new task."""
        keywords = data["keywords"] if endpoint == "keywords" else [data["keyword"]]
        scripts = [s for k in keywords if (s := self._scripts.get(_norm(k))) is not None]
        polls = max([self.ready_after_polls, *(s.queue_polls for s in scripts)])
        code = next((s.queue_code for s in scripts if s.queue_polls), 40602)
        return polls, code

    def _price(self, endpoint: str, data: dict[str, Any]) -> Decimal:
        if endpoint == "serp":
            return self.prices.serp(int(data["depth"]), int(data["priority"]))
        if endpoint in ("maps", "local_finder"):
            return self.prices.maps(int(data["priority"])) * local_serps(
                endpoint, int(data["depth"]), str(data["device"])
            )
        return self.prices.keyword_data_task

    # -- postback / pingback ---------------------------------------------------------------------

    def notify(self, tasks: list[_Task]) -> None:
        """Send the postbacks and pingbacks of tasks that just became ready, in the background."""
        for task in tasks:
            with self._lock:
                if task.notified or not (
                    task.data.get("postback_url") or task.data.get("pingback_url")
                ):
                    continue
                task.notified = True
            # Recorded in the list of the test that made the task ready, even if it ends first.
            job = asyncio.get_running_loop().create_task(self._deliver(task, self.deliveries))
            self._background.add(job)
            job.add_done_callback(self._background.discard)

    async def _deliver(self, task: _Task, record: list[tuple[str, int | str]]) -> None:
        async with httpx.AsyncClient(timeout=10.0) as http:
            postback = task.data.get("postback_url")
            if isinstance(postback, str):
                with self._lock:
                    answer = self._task_answer(task)
                body = gzip.compress(_encoder.encode(_envelope([answer])))
                await self._send(
                    http,
                    record,
                    "POST",
                    postback,
                    content=body,
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                )
            pingback = task.data.get("pingback_url")
            if isinstance(pingback, str):
                url = pingback.replace("$id", task.id).replace("$tag", task.tag)
                await self._send(http, record, "GET", url)

    async def _send(
        self,
        http: httpx.AsyncClient,
        record: list[tuple[str, int | str]],
        method: str,
        url: str,
        **kwargs: Any,
    ) -> None:
        try:
            response = await http.request(method, url, **kwargs)
            outcome: int | str = response.status_code
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        with self._lock:
            record.append((url, outcome))

    def authorised(self, header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            login, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return login == self.login and password == self.password


# -- validation of posted tasks ------------------------------------------------------------------


def _validate_common(item: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    data: dict[str, Any] = {}
    for key in ("location_code", "language_code", "tag", "postback_url", "pingback_url"):
        if key in item:
            data[key] = item[key]
    location = item.get("location_code")
    if not isinstance(location, int) or isinstance(location, bool) or location <= 0:
        return data, "Invalid Field: 'location_code'."
    if item.get("language_code") not in LANGUAGES:
        return data, "Invalid Field: 'language_code'."
    tag = item.get("tag")
    if tag is not None and (not isinstance(tag, str) or len(tag) > 255):
        return data, "Invalid Field: 'tag'."
    for key in ("postback_url", "pingback_url"):
        url = item.get(key)
        if url is not None and (
            not isinstance(url, str) or not url.startswith(("http://", "https://"))
        ):
            return data, f"Invalid Field: '{key}'."
    return data, None


def _validate(endpoint: str, item: Any) -> tuple[dict[str, Any], str | None]:
    if endpoint == "serp":
        return _validate_serp(item)
    if endpoint == "maps":
        return validate_maps(item, LANGUAGES)
    if endpoint == "local_finder":
        return validate_maps(item, LANGUAGES, default_depth=LOCAL_FINDER_DEPTH)
    return _validate_keywords(item)


def _validate_serp(item: Any) -> tuple[dict[str, Any], str | None]:
    if not isinstance(item, dict):
        return {}, "Invalid Field: 'task'."
    data, error = _validate_common(item)
    keyword = item.get("keyword")
    device = item.get("device", "desktop")
    depth = item.get("depth", 100)
    priority = item.get("priority", 1)
    data.update(
        keyword=keyword,
        device=device,
        os="windows" if device == "desktop" else "android",
        depth=depth,
        priority=priority,
        se_domain="google.com",
    )
    if error is not None:
        return data, error
    if not isinstance(keyword, str) or not keyword.strip() or len(keyword) > 700:
        return data, "Invalid Field: 'keyword'."
    if device not in ("desktop", "mobile"):
        return data, "Invalid Field: 'device'."
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= 700:
        return data, "Invalid Field: 'depth'."
    if priority not in (1, 2):
        return data, "Invalid Field: 'priority'."
    return data, None


def _validate_keywords(item: Any) -> tuple[dict[str, Any], str | None]:
    if not isinstance(item, dict):
        return {}, "Invalid Field: 'task'."
    data, error = _validate_common(item)
    keywords = item.get("keywords")
    data["keywords"] = keywords
    if error is not None:
        return data, error
    if (
        not isinstance(keywords, list)
        or not 1 <= len(keywords) <= MAX_KEYWORDS
        or not all(isinstance(k, str) and k.strip() and len(k) <= 80 for k in keywords)
    ):
        return data, "Invalid Field: 'keywords'."
    return data, None


# -- shapes --------------------------------------------------------------------------------------


def _envelope(
    tasks: list[dict[str, Any]],
    *,
    status_code: int = 20000,
    message: str | None = None,
    cost: Decimal = Decimal(0),
) -> dict[str, Any]:
    return {
        "version": "0.1.20260301",
        "status_code": status_code,
        "status_message": message or _MESSAGES.get(status_code, "Error."),
        "time": "0.0100 sec.",
        "cost": cost,
        "tasks_count": len(tasks),
        "tasks_error": sum(1 for t in tasks if t["status_code"] >= 40000),
        "tasks": tasks,
    }


def _task(
    task_id: str,
    status_code: int,
    data: dict[str, Any],
    *,
    message: str | None = None,
    cost: Decimal = Decimal(0),
    result: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "id": task_id,
        "status_code": status_code,
        "status_message": message or _MESSAGES.get(status_code, "Error."),
        "time": "0.0050 sec.",
        "cost": cost,
        "result_count": len(result) if result else 0,
        "path": _path(data),
        "data": data,
        "result": result,
    }


def _api_data(endpoint: str, function: str) -> dict[str, Any]:
    if endpoint == "serp":
        return {"api": "serp", "function": function, "se": "google", "se_type": "organic"}
    if endpoint in ("maps", "local_finder"):
        return {"api": "serp", "function": function, "se": "google", "se_type": endpoint}
    return {"api": "keywords_data", "function": function, "se": "google_ads"}


def _path(data: dict[str, Any]) -> list[str]:
    prefix = KEYWORDS_PREFIX
    if data.get("api") == "serp":
        prefix = {"maps": MAPS_PREFIX, "local_finder": LOCAL_FINDER_PREFIX}.get(
            str(data.get("se_type")), SERP_PREFIX
        )
    return [*prefix.strip("/").split("/"), str(data.get("function", ""))]


def _ready_entry(task: _Task) -> dict[str, Any]:
    posted = _provider_time(task.posted_at)
    if task.endpoint == "serp":
        return {
            "id": task.id,
            "se": "google",
            "se_type": "organic",
            "date_posted": posted,
            "tag": task.tag,
            "endpoint_regular": f"{SERP_PREFIX}/task_get/regular/{task.id}",
            "endpoint_advanced": f"{SERP_PREFIX}/task_get/advanced/{task.id}",
            "endpoint_html": f"/v3/serp/google/html/task_get/html/{task.id}",
        }
    return {
        "id": task.id,
        "se": "google_ads",
        "function": "search_volume",
        "date_posted": posted,
        "tag": task.tag,
        "endpoint": f"{KEYWORDS_PREFIX}/task_get/{task.id}",
    }


def _scripted_feature(
    kind: str, keyword: str, ranking: list[str], organic_count: int, script: KeywordScript
) -> list[tuple[int, dict[str, Any]]]:
    """The items of one programmed feature: (rank_group, fields) each."""
    slug = _slug(keyword)
    bare: dict[str, Any] = {"domain": None, "url": None, "title": None}
    if kind == "featured_snippet":
        if not organic_count:
            return []
        site = ranking[0]
        return [
            (
                1,
                {
                    "domain": site,
                    "url": f"https://{site}/{slug}",
                    "title": keyword,
                    "featured_title": keyword.title(),
                    "description": f"A short answer about {keyword}.",
                },
            )
        ]
    if kind == "local_pack":
        if organic_count <= 1:
            return []
        return list(enumerate(_local_pack(keyword, ranking[1]), start=1))
    if kind == "people_also_ask":
        return [(1, {**bare, "items": _questions(keyword, ranking)})]
    if kind == "video":
        return [(1, {**bare, "items": _videos(keyword)})]
    if kind == "ai_overview":
        cited = script.ai_references or [ranking[i] for i in (0, 2, 4)]
        return [(1, {**bare, **_ai_overview(keyword, cited)})]
    return [(1, bare)]


def _local_pack(keyword: str, site: str) -> list[dict[str, Any]]:
    """Three ``local_pack`` entries: the given site's business, then two without a website."""
    slug = _slug(keyword)
    entries: list[dict[str, Any]] = [
        {"domain": site, "url": f"https://{site}/", "title": f"{site.split('.')[0].title()}"}
    ]
    for n in (2, 3):
        entries.append({"domain": None, "url": None, "title": f"{slug.title()} place {n}"})
    for n, entry in enumerate(entries, start=1):
        digest = hashlib.sha256(f"{keyword}|{n}".encode()).hexdigest()
        entry.update(
            description=f"{keyword.title()} nearby",
            phone=None,
            is_paid=False,
            rating={"rating_type": "Max5", "value": 4.0 + n / 10, "votes_count": 10 * n},
            cid=str(int(digest[:15], 16)),
        )
    return entries


def _questions(keyword: str, ranking: list[str]) -> list[dict[str, Any]]:
    """``people_also_ask_element`` items, each answered by an organic result's page."""
    out = []
    for n, site in enumerate(ranking[3:5], start=1):
        question = f"What is the best {keyword} #{n}?"
        out.append(
            {
                "type": "people_also_ask_element",
                "title": question,
                "seed_question": None,
                "xpath": None,
                "expanded_element": [
                    {
                        "type": "people_also_ask_expanded_element",
                        "featured_title": None,
                        "url": f"https://{site}/{_slug(keyword)}-faq",
                        "domain": site,
                        "title": question,
                        "description": f"An answer about {keyword}.",
                    }
                ],
            }
        )
    return out


def _videos(keyword: str) -> list[dict[str, Any]]:
    digest = hashlib.sha256(keyword.encode()).hexdigest()
    return [
        {
            "type": "video_element",
            "source": "YouTube",
            "title": f"{keyword.title()} – video {n}",
            "timestamp": None,
            "url": f"https://www.youtube.com/watch?v={digest[n * 11 : n * 11 + 11]}",
        }
        for n in range(3)
    ]


def _ai_overview(keyword: str, cited: list[str]) -> dict[str, Any]:
    """An ``ai_overview`` item's body: its text element and its ``references``."""
    slug = _slug(keyword)
    references = [
        {
            "type": "ai_overview_reference",
            "source": site.split(".")[0].title(),
            "domain": site,
            "url": f"https://{site}/{slug}",
            "title": f"{keyword.title()} guide",
            "text": f"What {site} says about {keyword}.",
        }
        for site in cited
    ]
    return {
        "position": "left",
        "asynchronous_ai_overview": False,
        "items": [
            {
                "type": "ai_overview_element",
                "title": None,
                "text": f"{keyword.title()}: an overview.",
                "references": None,
            }
        ],
        "references": references,
    }


def _task_id(seed: int, sequence: int, now: datetime) -> str:
    digest = hashlib.sha256(f"{seed}:{sequence}".encode()).hexdigest()[:12]
    return f"{now:%m%d%H%M}-{seed % 10000:04d}-0066-{sequence % 10000:04d}-{digest}"


def _provider_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S +00:00")


def _norm(keyword: str) -> str:
    return " ".join(keyword.split()).casefold()


def _slug(keyword: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _norm(keyword)).strip("-")[:30] or "q"


def _json(body: dict[str, Any], status: int = 200) -> Response[bytes]:
    return Response(_encoder.encode(body), status_code=status, media_type=MediaType.JSON)


# -- the HTTP app --------------------------------------------------------------------------------


Runner = Callable[[], Awaitable[Response[Any]]]


async def _answer(
    sim: SerpSimulator, request: Request[Any, Any, Any], kind: str, run: Runner, **details: Any
) -> Response[Any]:
    """Count the call under its kind, answer a programmed fault or a refused login, else run it."""
    fault = sim.state.hit(kind, **details)
    if fault is not None:
        return await fault_response(fault)
    if not sim.authorised(request.headers.get("authorization", "")):
        return _json(_envelope([], status_code=40100), status=401)
    if not sim.admit_call():
        return _json(_envelope([], status_code=40202))
    return await run()


def _poster(sim: SerpSimulator, endpoint: str, kind: str) -> Any:
    """The ``task_post`` handler of ``endpoint``."""

    async def handler(request: Request[Any, Any, Any]) -> Response[Any]:
        async def run() -> Response[Any]:
            try:
                raw = msgspec.json.decode(await request.body())
            except msgspec.DecodeError:
                return _json(_envelope([], status_code=40501, message="Invalid JSON."))
            body, ready = sim.post_tasks(endpoint, raw)
            sim.notify(ready)
            return _json(body)

        return await _answer(sim, request, kind, run)

    return handler


def _ready_lister(sim: SerpSimulator, endpoint: str, kind: str) -> Any:
    """The ``tasks_ready`` handler of ``endpoint``."""

    async def handler(request: Request[Any, Any, Any]) -> Response[Any]:
        async def run() -> Response[Any]:
            body, became_ready = sim.tasks_ready(endpoint)
            sim.notify(became_ready)
            return _json(body)

        return await _answer(sim, request, kind, run)

    return handler


def _getter(sim: SerpSimulator, endpoint: str, kind: str) -> Any:
    """The ``task_get`` handler of ``endpoint``."""

    async def handler(request: Request[Any, Any, Any], task_id: FromPath[str]) -> Response[Any]:
        async def run() -> Response[Any]:
            body, became_ready = sim.task_get(endpoint, task_id)
            sim.notify(became_ready)
            return _json(body)

        return await _answer(sim, request, kind, run, task_id=task_id)

    return handler


def _locations_answer(
    sim: SerpSimulator, request: Request[Any, Any, Any], country: str | None
) -> Awaitable[Response[Any]]:
    """The free ``locations`` list, whole or of one country (``…/locations/fr``)."""

    async def run() -> Response[Any]:
        with sim._lock:
            result = sim.locations.result(country)
        data = {"api": "serp", "function": "locations", "se": "google"}
        task = _task(_task_id(sim.seed, 0, sim.clock.now()), 20000, data, result=result)
        task["path"] = [*LOCATIONS_PATH.strip("/").split("/"), *([country] if country else [])]
        return _json(_envelope([task]))

    return _answer(sim, request, "serp.locations", run)


def _locations_handlers(sim: SerpSimulator) -> list[Any]:
    async def every(request: Request[Any, Any, Any]) -> Response[Any]:
        return await _locations_answer(sim, request, None)

    async def of_country(request: Request[Any, Any, Any], country: FromPath[str]) -> Response[Any]:
        return await _locations_answer(sim, request, country)

    return [
        get(LOCATIONS_PATH, name="serp_locations")(every),
        get(f"{LOCATIONS_PATH}/{{country:str}}", name="serp_country_locations")(of_country),
    ]


def create_serp_app(sim: SerpSimulator) -> Litestar:
    """The simulator's routes; each call is counted under its kind before anything else."""
    handlers = [
        post(f"{SERP_PREFIX}/task_post", name="serp_post", status_code=200)(
            _poster(sim, "serp", "serp.task_post")
        ),
        get(f"{SERP_PREFIX}/tasks_ready", name="serp_ready")(
            _ready_lister(sim, "serp", "serp.tasks_ready")
        ),
        get(f"{SERP_PREFIX}/task_get/regular/{{task_id:str}}", name="serp_get")(
            _getter(sim, "serp", "serp.task_get")
        ),
        post(f"{KEYWORDS_PREFIX}/task_post", name="keywords_post", status_code=200)(
            _poster(sim, "keywords", "keywords.task_post")
        ),
        get(f"{KEYWORDS_PREFIX}/tasks_ready", name="keywords_ready")(
            _ready_lister(sim, "keywords", "keywords.tasks_ready")
        ),
        get(f"{KEYWORDS_PREFIX}/task_get/{{task_id:str}}", name="keywords_get")(
            _getter(sim, "keywords", "keywords.task_get")
        ),
        post(f"{MAPS_PREFIX}/task_post", name="maps_post", status_code=200)(
            _poster(sim, "maps", "maps.task_post")
        ),
        get(f"{MAPS_PREFIX}/task_get/advanced/{{task_id:str}}", name="maps_get")(
            _getter(sim, "maps", "maps.task_get")
        ),
        post(f"{LOCAL_FINDER_PREFIX}/task_post", name="local_finder_post", status_code=200)(
            _poster(sim, "local_finder", "local_finder.task_post")
        ),
        get(f"{LOCAL_FINDER_PREFIX}/task_get/advanced/{{task_id:str}}", name="local_finder_get")(
            _getter(sim, "local_finder", "local_finder.task_get")
        ),
        *_locations_handlers(sim),
    ]
    return simulator_app(handlers)


def start_serp_sandbox(sim: SerpSimulator | None = None) -> ThreadedServer:
    """Run the simulator on a free loopback port in its own thread (demo, benchmarks)."""
    return start_simulator(sim or SerpSimulator())
